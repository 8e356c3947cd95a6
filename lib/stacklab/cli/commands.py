"""The commands that work on one thing: ``resolve`` and ``train`` a stack, ``explore`` a
table, and the ``tasks``, ``ops`` and ``docs`` listings."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

from .flags import config_from
from .paths import out_dir, read_source, run_dir
from .progress import ProgressBar


def cmd_resolve(args, parser) -> None:
    from ..core.resolve import resolve

    source = read_source(args.file, parser)
    network = resolve(source, args.input, input_dtype=args.input_dtype or args.dtype,
                      dtype=args.dtype)
    if args.json:
        print(json.dumps(network.to_dict(), indent=2))
    else:
        print(network.table())


def cmd_train(args, parser) -> int:
    from ..lab.reports.compare import encoding
    from ..lab.reports.names import name_of
    from ..lab.runs.checkpoint import run_metadata, save_checkpoint
    from ..lab.train.record import Status
    from ..lab.train.trainer import Trainer

    source = read_source(args.file, parser) if args.file is not None else None
    trainer = Trainer(source, config_from(args))
    name = name_of(trainer.task.name, encoding(trainer.network), trainer.key)
    out = run_dir(args.out, trainer.key, name, parser)  # never another run's folder
    bar = ProgressBar(f"{trainer.task.name} T={trainer.config.seq_len}", trainer.config.steps)
    trainer.add_callback("on_batch_end", bar.show_run)
    trainer.add_callback("on_eval", lambda run: bar.show_run(run, force=True))  # fresh accuracy
    trainer.add_callback("on_end", lambda run: bar.show_run(run, force=True))
    previous = signal.signal(signal.SIGINT, lambda *_: trainer.stop())  # Ctrl-C ends the run cleanly
    try:
        run = trainer.run()
    finally:
        signal.signal(signal.SIGINT, previous)
        bar.close()
    if run.status == Status.FAILED:
        print(f"stacklab: the run failed: {run.error}", file=sys.stderr)
        return 1
    from ..lab.figures import figures_from_json, figures_json
    from ..lab.reports.html import report_html
    from ..lab.runs.files import write_summary

    figures = figures_json(run)  # drawn once: the report and a later `compare` share them
    save_checkpoint(out / "model.safetensors", run.model, run_metadata(run))
    write_summary(out, run, figures)  # metrics.json, figures.json, run.json
    (out / "report.html").write_text(report_html(run, figures_from_json(figures)),
                                     encoding="utf-8")
    write_images(out, figures_from_json(figures), args.format)
    final = run.final
    print(f"{run.status}: {run.step} steps in {run.seconds:.1f} s on {run.device}; held-out "
          f"accuracy {final['accuracy']:.2%}, loss {final['loss']:.4f}", file=sys.stderr)
    print(f"wrote run {name} to {out}: model.safetensors, metrics.json, report.html",
          file=sys.stderr)
    if run.status == Status.DIVERGED:
        print(f"stacklab: the run diverged: {run.error}", file=sys.stderr)
        return 1
    return 0


def cmd_explore(args, parser) -> int:
    from ..lab.models import encoding_of, model_config

    if args.rows is not None and args.rows < 2:
        parser.error("--rows must be 2 or more")
    where = Path(args.file)
    config = {} if where.suffix.lower() in (".npy", ".safetensors") else model_config(args.file)
    if args.key is None and encoding_of(config) is not None:
        return _explore_offsets(args, parser, config)
    from ..lab.figures import RunFigure, TableContext, figures_of_table
    from ..lab.figures.offsets import full_similarity_heatmap
    from ..lab.reports.table_file import read_table, table_scores

    if where.suffix.lower() == ".npy":
        table, name, summary = read_table(args.file, args.key), where.stem, None
    else:
        from ..lab.models import read_position_table

        found = read_position_table(args.file, args.key)
        table, name, summary = found.table, found.key, found.summary
    scores = table_scores(table, args.rows)
    figures = figures_of_table(TableContext(name, table, scores))  # the scores computed once
    if args.full:
        figures.append(RunFigure("Cosine similarity of every row", "Every pair of rows, not "
                                 "zoomed.", full_similarity_heatmap(table), key="cosine_full"))
    if summary:
        print(summary, file=sys.stderr)
    _write_explore(args, parser, name, scores, figures, summary)
    print(f"{name} {list(table.shape)}: " + (", ".join(
        f"{key} {value:.2f}" for key, value in scores.items() if isinstance(value, float))
        or "no score applies to a table this short"), file=sys.stderr)
    return 0


def _explore_offsets(args, parser, config: dict) -> int:
    """``explore`` of a model whose positions are not a table: the offset figure."""
    from ..lab.figures import RunFigure
    from ..lab.figures.offsets import OFFSET_CAPTION, OFFSET_TITLE, offset_encoding_plot
    from ..lab.models import offset_curves

    curves = offset_curves(config, Path(args.file).name or args.file)
    figure = RunFigure(OFFSET_TITLE, OFFSET_CAPTION, offset_encoding_plot([curves]),
                       key="offset_encoding")
    scores = {"encoding": curves.kind, "parameters": curves.about,
              "trained_length": curves.trained_len,
              **{f"at {curves.trained_len} ({line})": float(values[curves.trained_len])
                 for line, values in curves.lines.items() if curves.kind == "rotary"}}
    print(f"{curves.label}: {curves.kind} positions, {curves.about}; no position table",
          file=sys.stderr)
    _write_explore(args, parser, curves.label, scores, [figure])
    return 0


def _write_explore(args, parser, name: str, scores: dict, figures, read: str | None = None) -> None:
    """scores.json and report.html; the report also says what was ``read`` (which layout
    and rows of which checkpoint)."""
    from ..lab.reports.html import table_report_html

    out = out_dir(args.out, parser)
    (out / "scores.json").write_text(json.dumps({"table": name, **scores}, indent=2) + "\n")
    shown = {"read": read, **scores} if read else scores
    (out / "report.html").write_text(table_report_html(name, shown, figures), encoding="utf-8")
    print(f"wrote {out / 'scores.json'}, {out / 'report.html'}", file=sys.stderr)
    write_images(out, figures, args.format)


def write_images(out: Path, figures, formats: list[str]) -> None:
    """Each figure as ``figures/KEY.FORMAT`` for every format asked (``--format``)."""
    if not formats:
        return
    from ..lab.figures.export import export

    folder = out / "figures"
    folder.mkdir(exist_ok=True)
    for figure in figures:
        for format in dict.fromkeys(formats):
            export(figure.figure, folder / f"{figure.key}.{format}")
    print(f"wrote {len(figures)} figures as {', '.join(dict.fromkeys(formats))} to {folder}",
          file=sys.stderr)


def _print_columns(rows: list[tuple[str, ...]]) -> None:
    """Left-aligned columns, each as wide as its widest cell plus two; the last one free."""
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("".join(cell.ljust(width) for cell, width in zip(row, widths)) + row[-1])


def cmd_tasks(args, parser) -> None:
    from ..lab.tasks import TASKS

    if args.json:
        print(json.dumps([task.to_dict() for task in TASKS.values()], indent=2))
        return
    rows = [("name", "vocab", "output", "description")]
    rows += [(t.name, str(t.vocab), t.output_text(), t.description) for t in TASKS.values()]
    _print_columns(rows)


def cmd_ops(args, parser) -> None:
    from ..core.spec import catalog

    specs = list(catalog().values())
    if args.json:
        print(json.dumps([{"name": s.name, "identity": s.identity, "category": s.category,
                           "signature": s.signature, "shape": s.shape_text,
                           "summary": s.summary} for s in specs], indent=2))
        return
    rows = [("identity", "category", "signature", "summary")]
    rows += [(s.identity, s.category, s.signature, s.summary) for s in specs]
    _print_columns(rows)


def cmd_docs(args, parser) -> None:
    from ..core.docs import write_docs

    try:
        written = write_docs(args.out)
    except OSError as err:
        parser.error(f"cannot write to {args.out!r}: {err.strerror or err}")
    print(f"wrote {len(written)} pages to {args.out}", file=sys.stderr)


def cmd_length_table(args, parser) -> int:
    from ..lab.reports.length_table import run

    if args.workers < 1 or args.steps < 1:
        parser.error("--workers and --steps must be 1 or more")
    return run(args)


def cmd_docs_tables(args, parser) -> int:
    from ..lab.reports.docs_tables import stale_tables, write_tables

    if args.check:
        stale = stale_tables(args.root)
        for line in stale:
            print(f"stale: {line}", file=sys.stderr)
        print(f"{'no' if not stale else len(stale)} stale table(s)", file=sys.stderr)
        return 1 if stale else 0
    changed = write_tables(args.root)
    print(f"rewrote {', '.join(changed) or 'nothing (every table matches its results)'}",
          file=sys.stderr)
    return 0
