"""The length-generalization table in one command:

    stacklab length-table --out DIR [--steps 200] [--seeds 0-2] [--workers 3] [--fine-tune 50]
    stacklab length-table --out docs/length_generalization     (the table the docs show)

Every encoding x the length tasks (copy, addition, selective_copy) x seeds, each trained
at T = 16 and evaluated at 2T and 4T: accuracy inside T and past T (the positions past
16 of the 64-long sequences) and overall at each length. The RoPE runs are evaluated again
with each RoPE scaling (linear, ntk, yarn; the factor is each length over T), on the same
trained model, and once more after a short fine-tune at each new length (``--fine-tune``
steps, 50 by default; with no scaling too, to tell the scaling's share from the
fine-tune's). Each run (task, encoding, seed) is one job on ``--workers`` processes; the
progress line counts the runs done of all of them and the time left. Writes
``results.csv`` (one row per run, scaling and fine-tune), ``comparison.html`` (the table,
seeds averaged), ``table.md`` and ``timing.json`` to ``--out``, and nowhere else.
"""

from __future__ import annotations

import concurrent.futures
import csv
import html
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from ...ops.position_settings import rope_scaled
from ..measure.lengths import length_generalization
from ..tasks import TASKS
from ..train.fine_tune import fine_tuned_at
from ..train.trainer import train

T = 16
LENGTHS = (T, 2 * T, 4 * T)
TASK_NAMES = ("copy", "addition", "selective_copy")

# Each encoding as the lines it puts between the token embedding and the attention's
# arguments: (table line, attention's position arguments, train settings). The rest of
# the stack is the task's preset (one non-causal attention; two for addition).
ENCODINGS = {
    "learned": ("pos_embed(64)\n", "", {}),
    "learned+randomized": ("pos_embed(64)\n", "", {"random_positions": 64}),
    "sinusoidal": ("sin_pos(64)\n", "", {}),
    "none (NoPE)": ("", "", {}),
    "rope": ("", ', position="rope"', {}),
    "rope+randomized": ("", ', position="rope"', {"random_positions": 64}),
    "rope 25% (partial)": ("", ', position="rope", rotary=0.25', {}),
    "xpos": ("", ', position="xpos"', {}),
    "alibi": ("", ', position="alibi"', {}),
    "relative (T5)": ("", ', position="relative"', {}),
    "kerple": ("", ', position="kerple"', {}),
    "kerple_power": ("", ', position="kerple_power"', {}),
    "fire": ("", ', position="fire"', {}),
    "cope": ("", ', position="cope"', {}),
}
# The columns shown: inside T (at the trained length) and past T at 2T and 4T. The CSV also
# has inside@64 (positions below 16 of the 64-long sequences), empty for these three tasks:
# none labels a position below 16 at length 64.
SHOWN = ("acc@16", "past@32", "past@64")
ABACUS = "abacus"  # addition only: abacus(...) in place of embedding and pos_embed
SCALINGS = ("linear", "ntk", "yarn")
FINE_TUNE = 50  # steps at each new length, a quarter of the training's 200
LR, BATCH = 3e-3, 64  # AdamW's rate and the batch, for every run of the table


# The stack every encoding is trained in, written out here rather than read from the task's
# preset (the presets got cheaper since; this table keeps its setting): D = 64, one attention
# with 4 heads and no causal mask (two for addition, whose carries need a second look), an
# MLP head. {table} is the encoding's table line, {position} its attention arguments.
BASE = ("embedding({vocab}, 64)\n{table}{attention}layer_norm()\nlinear(128)\nrelu()\n"
        "linear({classes})")


def stack_for(task_name: str, encoding: str) -> str:
    """The table's stack for ``task_name`` with ``encoding``'s position table and arguments
    (Abacus: an abacus op in place of the embedding and the table)."""
    task = TASKS[task_name]
    layers = 2 if task_name == "addition" else 1
    table, position, _ = ENCODINGS.get(encoding, ("", "", {}))
    stack = BASE.format(vocab=task.vocab, table=table, classes=task.n_classes(T),
                        attention=f"attention(4{position})\n" * layers)
    if encoding == ABACUS:
        stack = stack.replace(f"embedding({task.vocab}, 64)",
                              f"abacus({task.vocab}, 64, digits=11)")
    return stack


def split(entry: dict) -> tuple[float | None, float | None]:
    """Accuracy inside T and past T of a length's entry (None where it could not run)."""
    if "per_position" not in entry:
        return None, None
    per_position = [v for v in entry["per_position"]]
    inside = [v for v in per_position[:T] if v is not None]
    past = [v for v in per_position[T:] if v is not None]
    mean = lambda values: round(statistics.fmean(values), 4) if values else None  # noqa: E731
    return mean(inside), mean(past)


def rows_of(task_name, encoding, seed, scaling, found, seconds, fine_tune: int = 0) -> dict:
    row = {"task": task_name, "encoding": encoding, "seed": seed, "rope_scaling": scaling,
           "fine_tune_steps": fine_tune, "train_seconds": round(seconds, 2)}
    for length in LENGTHS:
        entry = found.get(str(length), {})
        row[f"acc@{length}"] = entry.get("accuracy")
    row["inside@64"], row["past@64"] = split(found.get(str(4 * T), {}))
    row["past@32"] = split(found.get(str(2 * T), {}))[1]
    return row


def train_one(task_name: str, encoding: str, seed: int, steps: int, device: str,
              fine_tune: int = FINE_TUNE) -> list[dict]:
    settings = {} if encoding == ABACUS else ENCODINGS[encoding][2]
    start = time.perf_counter()
    run = train(stack_for(task_name, encoding), task=task_name, seed=seed,
                         steps=steps, seq_len=T, device=device, target_accuracy=None,
                         lr=LR, batch_size=BATCH,  # the table's own, not the task's preset's
                         eval_every=steps,  # one held-out evaluation, at the end
                         eval_lengths=",".join(map(str, LENGTHS)), **settings)
    seconds = time.perf_counter() - start
    if run.status != "finished":
        raise RuntimeError(f"{task_name} {encoding} seed {seed}: {run.status} {run.error}")
    rows = [rows_of(task_name, encoding, seed, "none", run.length_generalization, seconds)]
    if encoding == "rope":  # the same trained model, stretched at evaluation
        for scaling in SCALINGS:
            with rope_scaled(run.model, scaling, None, T):
                found = length_generalization(run, LENGTHS)
            rows.append(rows_of(task_name, encoding, seed, scaling, found, seconds))
        if fine_tune:
            rows += fine_tuned_rows(run, task_name, seed, fine_tune)
    return rows


def fine_tuned_rows(run, task_name: str, seed: int, steps: int) -> list[dict]:
    """The RoPE run fine-tuned for ``steps`` at each new length (a fresh copy of the trained
    weights each time) with no scaling and with each scaling, and evaluated at that length:
    the fine-tune the scalings' papers add. No accuracy at 16 (not the trained model)."""
    rows = []
    for scaling in ("none", *SCALINGS):
        start, found = time.perf_counter(), {}
        for length in LENGTHS[1:]:
            with fine_tuned_at(run, length, steps, scaling):
                found.update(length_generalization(run, [length]))
        rows.append(rows_of(task_name, "rope", seed, scaling, found,
                            time.perf_counter() - start, fine_tune=steps))
    return rows


def label(encoding: str, scaling: str, fine_tune: int) -> str:
    """The table's name of a row: ``rope + linear scaling + 50-step fine-tune``."""
    name = encoding if scaling == "none" else f"{encoding} + {scaling} scaling"
    return f"{name} + {fine_tune}-step fine-tune" if fine_tune else name


def averaged(rows: list[dict]) -> list[dict]:
    """One row per task, encoding and scaling: the mean over seeds (and its spread)."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        key = (row["task"], row["encoding"], row["rope_scaling"],
               int(row.get("fine_tune_steps") or 0))
        groups.setdefault(key, []).append(row)
    table = []
    for (task, encoding, scaling, fine_tune), members in groups.items():
        entry = {"task": task, "encoding": label(encoding, scaling, fine_tune),
                 "paper": paper_of(encoding, scaling, fine_tune), "seeds": len(members)}
        for key in ("acc@16", "inside@64", "past@32", "past@64"):
            values = [m[key] for m in members if m[key] is not None]
            entry[key] = round(statistics.fmean(values), 3) if values else None
            entry[key + " min"] = round(min(values), 3) if values else None
            entry[key + " max"] = round(max(values), 3) if values else None
        table.append(entry)
    return table


# What each encoding's paper reports for its own setting (quoted from the abstracts and
# main results; none of them is our setting: a one- or two-layer encoder, 200 steps, T=16).
PAPERS = {
    "learned": "Ruoss et al. 2023: a learned table fails past its trained length on their "
               "15 algorithmic tasks (trained up to 40, tested 41-500).",
    "learned+randomized": "Ruoss et al. 2023: randomized positions raise accuracy on unseen "
                          "lengths by 12.0% on average over 15 tasks (up to 43.5%).",
    "sinusoidal": "Press et al. 2022: sinusoidal positions extrapolate poorly past the "
                  "trained length (language modelling).",
    "none (NoPE)": "Kazemnejad et al. 2023: decoder-only NoPE generalizes in length better "
                   "than RoPE, ALiBi and T5 on copy and addition; NoPE needs a causal mask to "
                   "know positions at all, and ours has none.",
    "rope": "Chen et al. 2023: RoPE beyond its trained length fails (perplexity > 10^3 for "
            "LLaMA) without interpolation.",
    "rope+randomized": "Ruoss et al. 2023: randomized RoPE among their best encodings.",
    "rope 25% (partial)": "GPT-NeoX/Pythia use 25% rotary; no length-generalization figure.",
    "xpos": "Sun et al. 2022: trained at 1024, lower perplexity than RoPE at 2048-4096.",
    "alibi": "Press et al. 2022: trained at 1024, matches a sinusoidal model trained at 2048.",
    "relative (T5)": "Press et al. 2022: T5 bias extrapolates, slower than ALiBi.",
    "kerple": "Chi et al. 2022: trained at 512, lower perplexity than ALiBi up to 16x longer.",
    "kerple_power": "Chi et al. 2022: the power variant extrapolates less well than log.",
    "fire": "Li et al. 2023: better length generalization than ALiBi, Kerple and T5 (C4, "
            "SCROLLS).",
    "cope": "Golovneva et al. 2024: solves selective copy, counting and Flip-Flop where "
            "standard encodings fail, and generalizes to longer counts.",
    "abacus": "McLeish et al. 2024: trained on 20-digit addition, 99% on 100 digits.",
    "rope + linear scaling": "Chen et al. 2023: interpolation at 2-32x, with about 1,000 "
                             "steps of fine-tuning (none here).",
    "rope + ntk scaling": "NTK-aware scaling (bloc97, 2023): longer contexts without "
                          "fine-tuning at a small perplexity cost.",
    "rope + yarn scaling": "Peng et al. 2023: LLaMA 2 to 64-128k with 10x fewer fine-tuning "
                           "tokens; works without fine-tuning at small factors.",
    "rope + fine-tune": "Chen et al. 2023: fine-tuning at the new length without "
                        "interpolation adapts slowly (2048 to 2560 after 10,000 steps).",
}


def paper_of(encoding: str, scaling: str, fine_tune: int) -> str:
    """What the paper reports beside a row (a fine-tuned row: its scaling's paper)."""
    if fine_tune and scaling == "none":
        return PAPERS["rope + fine-tune"]
    return PAPERS.get(label(encoding, scaling, 0), "")


def write_html(table: list[dict], path: Path, note: str) -> None:
    def cell(entry, key):
        value = entry[key]
        if value is None:
            return "<td>—</td>"
        shade = int(255 - 120 * value)
        return (f'<td style="background: rgb({shade},255,{shade})" title="seeds: '
                f'{entry[key + " min"]}–{entry[key + " max"]}">{value:.2f}</td>')

    keys = SHOWN
    parts = ["<!doctype html><meta charset='utf-8'><title>Length generalization</title>",
             "<style>body{font-family:sans-serif} td,th{padding:2px 8px;text-align:right}"
             " td:nth-child(2){text-align:left}</style>",
             f"<h1>Length generalization: trained at T = {T}, evaluated at {2 * T} and "
             f"{4 * T}</h1><p>{html.escape(note)}</p>"]
    for task in TASK_NAMES:
        parts.append(f"<h2>{task}</h2><table><tr><th>task</th><th>encoding</th>"
                     + "".join(f"<th>{k}</th>" for k in keys) + "</tr>")
        for entry in (e for e in table if e["task"] == task):
            parts.append(f"<tr><td>{task}</td><td>{html.escape(entry['encoding'])}</td>"
                         + "".join(cell(entry, k) for k in keys) + "</tr>")
        parts.append("</table>")
    path.write_text("\n".join(parts), encoding="utf-8")


def _train_group(job: tuple) -> list[dict]:
    """One task and encoding over the seeds (a worker process's share)."""
    task_name, encoding, seeds, steps, device, fine_tune = job
    torch.set_num_threads(1)
    return [row for seed in seeds
            for row in train_one(task_name, encoding, seed, steps, device, fine_tune)]


def build_table(steps: int, seeds, device: str, tasks=TASK_NAMES, workers: int = 1,
                fine_tune: int = FINE_TUNE, encodings=None) -> tuple[list[dict], float]:
    """Every row of the table (`train_one` for each task, encoding and seed, one job each,
    on ``workers`` processes), a progress line as each run finishes (runs done of all,
    the time so far and the time left), and the seconds it all took."""
    start = time.perf_counter()
    jobs = [(task_name, encoding, [seed], steps, device, fine_tune) for task_name in tasks
            for encoding in list(ENCODINGS) + ([ABACUS] if task_name == "addition" else [])
            if encodings is None or encoding in encodings for seed in seeds]
    done: list[int] = []

    def report(job, rows):
        done.append(1)
        spent = time.perf_counter() - start
        left = spent / len(done) * (len(jobs) - len(done))
        print(f"[{len(done)}/{len(jobs)}] {job[0]} {job[1]} seed {job[2][0]}: past@64 "
              f"{rows[0]['past@64']}; {spent:.0f} s so far, about {left:.0f} s left",
              file=sys.stderr, flush=True)
        return rows

    if workers <= 1:
        groups = [report(job, _train_group(job)) for job in jobs]
    else:
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            futures = {pool.submit(_train_group, job): i for i, job in enumerate(jobs)}
            groups = [None] * len(jobs)
            for future in concurrent.futures.as_completed(futures):
                i = futures[future]
                groups[i] = report(jobs[i], future.result())
    return [row for group in groups for row in group], time.perf_counter() - start


def write_markdown(table: list[dict], path: Path, note: str) -> None:
    """The table as Markdown, one section per task, each row beside what its paper reports."""
    keys = SHOWN
    text = lambda v: "—" if v is None else f"{v:.2f}"  # noqa: E731
    lines = ["<!-- written by `stacklab length-table`; rerun it instead of editing -->", "",
             f"# Length generalization table (trained at T = {T})", "", note, "",
             "acc@16: held-out accuracy at the trained length (inside T); past@32 and "
             "past@64: at lengths 32 and 64, over the positions from 16 on (past T). Only the scored positions count (copy: the blanks; "
             "addition: the answer digits; selective_copy: the 4 query slots, all past 16 at "
             "lengths 32 and 64). Mean over seeds, (min-max). A row with an N-step "
             "fine-tune is the RoPE model trained N more steps at 32 (for past@32) and at 64 "
             "(for past@64), its rotations scaled as the row says, from the same trained "
             "weights each time.", ""]
    for task in TASK_NAMES:
        lines += [f"## {task}", "", "| encoding | " + " | ".join(keys) + " | the paper reports |",
                  "|---|" + "---|" * (len(keys) + 1)]
        for entry in (e for e in table if e["task"] == task):
            cells = [f"{text(entry[k])} ({text(entry[k + ' min'])}-{text(entry[k + ' max'])})"
                     if entry[k] is not None else "—" for k in keys]
            lines.append(f"| {entry['encoding']} | " + " | ".join(cells)
                         + f" | {entry['paper']} |")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")


def rewrite(out: Path) -> int:
    """table.md and comparison.html again from ``out``'s results.csv and timing.json."""
    rows = list(csv.DictReader(open(out / "results.csv", newline="")))
    for row in rows:
        for key in ("acc@16", "acc@32", "acc@64", "inside@64", "past@32", "past@64"):
            row[key] = float(row[key]) if row[key] else None
    table = averaged(rows)
    note = json.loads((out / "timing.json").read_text())["note"]
    write_html(table, out / "comparison.html", note)
    write_markdown(table, out / "table.md", note)
    return 0


def run(args) -> int:
    """``stacklab length-table`` (its flags: `stacklab.cli.flags`)."""
    out = Path(args.out)
    if args.rewrite:
        return rewrite(out)
    low, _, high = args.seeds.partition("-")
    seeds = range(int(low), int(high or low) + 1)
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    rows, seconds = build_table(args.steps, seeds, args.device, args.tasks.split(","),
                                args.workers, args.fine_tune,
                                args.encodings.split(",") if args.encodings else None)
    with open(out / "results.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    table = averaged(rows)
    note = (f"{len(rows)} rows, {args.steps} steps per run ({args.fine_tune}-step fine-tunes "
            f"of the RoPE runs at 32 and 64), seeds {args.seeds}, device "
            f"{args.device}, {seconds:.0f} s in all ({args.workers} worker processes, one torch thread "
            f"each, on {os.cpu_count()} shared cores). Each cell is the mean "
            "accuracy over seeds (hover: min–max).")
    write_html(table, out / "comparison.html", note)
    write_markdown(table, out / "table.md", note)
    (out / "timing.json").write_text(json.dumps(
        {"seconds": round(seconds, 1), "runs": len(rows), "steps": args.steps,
         "seeds": args.seeds, "device": args.device, "workers": args.workers,
         "fine_tune": args.fine_tune, "note": note,
         "torch": torch.__version__,
         "table": table}, indent=1))
    print(f"{len(rows)} rows in {seconds:.0f} s -> {out}", file=sys.stderr)
    return 0
