"""The tables of measured results in the benchmarks and hardening guides, drawn from the
result files ``make bench`` and ``make loadtest`` write (`docs_tables` places them).

Which tables are results: those that say what the committed result files hold now, the
benchmarks' targets and `pos_embed` comparison (``bench/results.json``) and the hardening
guide's "where it stands now" (``bench/loadtest.json``, ``bench/request_costs.json``,
``bench/loadtest_votes.json``). The hardening guide's other tables are records of earlier
rounds (each one's "now" was measured on the code of its day; the result files have been
overwritten since), and the rest are settings or prose; none of those is drawn here. The
"last round" column of the hardening table is such a record too, declared with its row.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["BENCH_RESULTS", "HALL_RESULTS", "benchmark_targets", "pos_embed_table",
           "hall_table"]

BENCH_RESULTS = ("bench/results.json",)
HALL_RESULTS = ("bench/loadtest.json", "bench/request_costs.json", "bench/loadtest_votes.json")


def _read(root: Path, name: str) -> dict:
    return json.loads((root / name).read_text(encoding="utf-8"))


def _met(flag: bool) -> str:
    return "met" if flag else "**missed**"


def _ms(value: float) -> str:
    return f"{value:.3f} ms" if value < 10 else f"{value:.1f} ms"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    def line(cells) -> str:
        return "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"

    return "\n".join([line(header), "|" + "---|" * len(header), *map(line, rows)])


def benchmark_targets(root: Path) -> str:
    """The benchmarks guide's targets, each with what ``bench/results.json`` measured."""
    r = _read(root, BENCH_RESULTS[0])
    medium = r["pos_embed"]["medium"]["forward_backward"]
    chain, branching = r["resolve"], r["resolve_branching"]
    step, induction, app = r["train_step"], r["train_step_induction"], r["app"]
    tasks = {name: row for name, row in r["tasks"].items() if name != "targets"}
    cli = r["cli_help"]["seconds"]
    rows = [
        ("`pos_embed` fwd+bwd at B=32, T=256, D=256: ≥ 1.5x faster than the tutorial",
         f"{medium['tutorial_over_stacklab']:.2f}x faster ({_ms(medium['stacklab_ms'])} vs "
         f"about {_ms(medium['stacklab_ms'] * medium['tutorial_over_stacklab'])})",
         _met(r["pos_embed"]["targets"]["faster_than_tutorial_1_5x"])),
        ("… and within 1.05x of a bare `x + w[:T]`",
         f"{medium['stacklab_over_bare']:.2f}x of bare (see the note on spread below)",
         _met(r["pos_embed"]["targets"]["within_1_05x_of_bare"])),
        (f"built stack training step vs the same model hand-written ({step['stack']})",
         f"{step['stacklab_over_hand']:.3f}x ({_ms(step['stacklab_ms'])} vs "
         f"{_ms(step['hand_ms'])} medians)", _met(step["targets"]["within_1_05x"])),
        (f"the `induction` preset's training step (two causal attentions) within 1.05x of the "
         f"same model hand-written ({induction['stack'].split(', ', 1)[1]})",
         f"{induction['stacklab_over_hand']:.3f}x ({_ms(induction['stacklab_ms'])} vs "
         f"{_ms(induction['hand_ms'])}; same parameters, outputs checked equal before timing)",
         _met(induction["targets"]["within_1_05x"])),
        ("resolve a 1,000-op stack in under 50 ms", f"{chain['1000']['median_ms']:.1f} ms",
         _met(chain["targets"]["1000_ops_under_50ms"])),
        ("resolve cost grows linearly", ", ".join(
            f"{chain[n]['us_per_op']:.0f}" for n in ("10", "100", "1000", "10000"))
         + " µs per op at 10, 100, 1,000, 10,000 ops", _met(chain["targets"]["linear_growth"])),
        ("resolve a 1,000-line branching stack (pre-LN blocks: `add` and "
         "`attention(residual=false)`, unique names) in under 50 ms",
         f"{branching['1000']['median_ms']:.1f} ms, beside the 1,000-op chain at "
         f"{branching['1000']['chain_median_ms']:.1f} ms in the same run "
         f"({branching['1000']['branching_over_chain']:.2f}x)",
         _met(branching["targets"]["1000_lines_under_50ms"])),
        ("… and its cost grows linearly", ", ".join(
            f"{branching[n]['us_per_line']:.0f}" for n in ("100", "300", "1000"))
         + f" µs per line at 100, 300, 1,000 lines: 1,000 over 100 is "
           f"{branching['per_line_1000_over_100']:.2f}",
         _met(branching["targets"]["linear_growth"])),
        ("every task's preset reaches 99% held-out accuracy in under 5 s", ", ".join(
            f"{name} {row['median_seconds']:.2f} s" for name, row in tasks.items())
         + f" (medians of 3 seeds; the worst seed: "
           f"{max(row['max_seconds'] for row in tasks.values()):.2f} s)",
         _met(r["tasks"]["targets"]["all_under_5s"])),
        ("a Build-page edit re-renders in under 150 ms of server time",
         f"median {app['build_edit_ms']['median']:.0f} ms, p95 {app['build_edit_ms']['p95']:.0f} ms",
         _met(app["targets"]["build_edit_under_150ms"])),
        ("a 2048-row similarity heatmap stays well under 2 MB",
         f"{app['heatmap_2048_rows_bytes'] / 1e6:.2f} MB of JSON (zoomed on its first 384 rows: "
         "384² cells, never averaged, float32 typed arrays)",
         _met(app["targets"]["heatmap_under_2MB"])),
        ("`stacklab --help` answers in under 1 s",
         f"{cli['stacklab --help']:.2f} s (a fresh `python -c pass` {cli['python -c pass']:.2f} s, "
         f"`import torch` {cli[next(k for k in cli if 'torch' in k)]:.2f} s)",
         _met(r["cli_help"]["targets"]["help_under_1s"])),
    ]
    return _table(("target", "measured", ""), rows)


def pos_embed_table(root: Path) -> str:
    """`pos_embed` against the other ways of adding positions, each size and mode."""
    sizes = _read(root, BENCH_RESULTS[0])["pos_embed"]
    rows = []
    for label, size in sizes.items():
        if label == "targets":
            continue
        for mode, shown in (("forward", "forward"), ("forward_backward", "fwd+bwd")):
            r = size[mode]
            rows.append((f"{size['B']}, {size['T']}, {size['D']}", shown, _ms(r["stacklab_ms"]),
                         f"{r['tutorial_over_stacklab']:.2f}x",
                         f"{r['nanogpt_over_stacklab']:.2f}x", f"{r['stacklab_over_bare']:.2f}"))
    return _table(("B, T, D", "mode", "stacklab",
                   "tutorial (`nn.Embedding` + `arange` + `expand`)",
                   "nanoGPT (`nn.Embedding` + `arange`)", "stacklab / bare"), rows)


def _seconds(stats: dict) -> str:
    return f"{stats['p95']:.2f} s"


def hall_table(root: Path) -> str:
    """The hardening guide's "where it stands now": the load test's scenarios, the request
    costs and the votes, beside the round before (a record) and each target."""
    scenarios = _read(root, HALL_RESULTS[0])["scenarios"]
    costs = _read(root, HALL_RESULTS[1])
    votes = _read(root, HALL_RESULTS[2])
    hall300, hall500 = scenarios["hall300"], scenarios["hall500"]
    rows = [
        ("300 on one link: p95, real browser", "0.36 s, 3.38 s",
         f"**{_seconds(hall300['link_to_pattern_s'])}, {hall300['browser_s']:.2f} s**",
         "≤ 2 s, ≤ 4 s"),
        ("500 on one link: p95, peak memory", "4.6 s, 390 MB",
         f"**{_seconds(hall500['link_to_pattern_s'])}** (browser {hall500['browser_s']:.2f} s), "
         f"{hall500['server_peak_rss_mb']:.0f} MB", "≤ 4 s, ≤ 1.5 GB"),
        ("300 on a finished `run=` link: p95", "0.08 s",
         f"**{_seconds(scenarios['run_link_300']['link_to_pattern_s'])}**", "≤ 0.5 s"),
        ("100 following a lesson: step change p95", "3.18 s",
         f"**{_seconds(scenarios['lesson_100']['step_change_s'])}**", "≤ 1.5 s"),
        ("300 over two app servers on Ray: p95", "5.85 s",
         f"**{_seconds(scenarios['ray_hall300']['link_to_pattern_s'])}**", "≤ 2 s"),
        ("shared running poll: server CPU", "22.2 ms (a rerun)",
         f"**{costs['shared_running_poll']['mean_ms']:.2f} ms** (the endpoint; floor "
         f"{costs['floor']['mean_ms']:.2f} ms)", "≤ 5 ms"),
        ("finished `run=` poll: server CPU", "16.0 ms (a rerun)",
         f"**{costs['run_link_poll']['mean_ms']:.2f} ms** (the endpoint)", "≤ 2 ms"),
        ("followed lesson poll: server CPU", "14.5 ms (a rerun)",
         f"**{costs['lesson_step_poll']['mean_ms']:.2f} ms** (the endpoint)", "—"),
        ("opening the teacher's link and pressing Train", "—",
         f"{costs['link_open_press']['mean_ms']:.2f} ms (Streamlit's floor "
         f"{costs['floor_open_press']['mean_ms']:.2f} ms)", "—"),
        ("votes at 100: vote → projector p95; student poll p95", "2.50 s; 1.18 s",
         f"**{_seconds(votes['vote_to_projector_s'])}; {_seconds(votes['poll_voting_s'])}**",
         "≤ 2 s; ≤ 1 s"),
    ]
    return _table(("figure", "the last round (quiet)", "now (quiet)", "target"), rows)
