"""The captions and scores of `FIGURES` that take more than a line: plain functions of a
run's `FigureContext` (or of the run), named after the figure they word."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..measure import score_maths
from ..measure.head_scores import HEAD_SCORES, head_score_label
from .head_grids import scores_present

if TYPE_CHECKING:
    from .context import FigureContext


def probe_caption(ctx: FigureContext) -> str:
    probe = ctx.probe
    T, P = probe.trained_len, probe.probe_len
    return (f"Accuracy at each position of {P}-long sequences, trained on {T}, beside the same "
            f"model with its position tables at their initial values (dotted). Past T the "
            f"rows were never trained: {probe.beyond:.2f} there against {probe.inside:.2f} "
            f"inside T; the baseline gets {probe.baseline_beyond:.2f} and "
            f"{probe.baseline_inside:.2f}.")


def probe_score(ctx: FigureContext) -> str:
    probe = ctx.probe
    return (f"accuracy inside T {probe.inside:.2f}, past T {probe.beyond:.2f} "
            f"(tables at init: {probe.baseline_inside:.2f}, {probe.baseline_beyond:.2f})")


def attention_score(ctx: FigureContext) -> str:
    return ctx.score("pattern" if ctx.run.task.partner else "symmetry")


def held_out_score(ctx: FigureContext) -> str:
    partner = ctx.run.task.partner
    if partner is None:
        return ""
    weights, _ = ctx.attention_map
    return f"partner attention on held-out data {score_maths.partner_attention(weights, partner(ctx.T)):.2f}"


def rows_alone_caption(ctx: FigureContext) -> str:
    table, initial = ctx.run.table(ctx.node)[:ctx.T], ctx.run.initial_tables[ctx.node][:ctx.T]
    return (f"Row t of {ctx.node} fed alone (no token) through the rest of the stack: the "
            "class it picks. A bright diagonal means each row alone says its own position. "
            f"Training grew the rows (mean norm {initial.norm(dim=1).mean():.2f} at init, "
            f"{table.norm(dim=1).mean():.2f} now) and turned them towards the head's class "
            "directions; their cosine map hardly changed.")


def without_table_score(run) -> str:
    found = run.attention_pattern()
    if found is None:
        return ""
    pattern = found["pattern"]
    return (f"partner attention {pattern['value']:.2f} (at init {pattern['init']:.2f})"
            if pattern["value"] is not None else "")


def lengths_caption(run) -> str:
    T = run.config.seq_len
    parts = [f"Held-out accuracy at each position of sequences of other lengths, trained on "
             f"T = {T} (the dashed line marks T): past T a learned table has only untrained rows, "
             "while encodings of distance (RoPE, ALiBi, relative) may carry on."]
    for length, entry in run.length_generalization.items():
        if "error" in entry:
            parts.append(f"Length {length} not measured: {entry['error'].rstrip('.')}.")
        elif "note" in entry:
            parts.append(f"At length {length} the labels change meaning: {entry['note']}.")
            break
    return " ".join(parts)


def lengths_score(run) -> str:
    return "; ".join(f"length {length}: " + (f"{entry['accuracy']:.2f}" if "accuracy" in entry
                                               else "beyond capacity")
                     for length, entry in run.length_generalization.items())


def drift_score(ctx: FigureContext) -> str:
    drift = ctx.run.row_drift(ctx.node)
    text = f"mean drift of the trained rows {drift[:ctx.T].mean():.3g}"
    return text + (f", of the rest {drift[ctx.T:].mean():.3g}" if drift.shape[0] > ctx.T else "")


def grad_score(ctx: FigureContext) -> str:
    grad = ctx.run.row_grad_norm[ctx.node]
    if grad.shape[0] <= ctx.T:
        return ""
    beyond = grad[ctx.T:].abs().max().item()
    return "largest gradient past T: " + ("exactly 0" if beyond == 0 else f"{beyond:.3g}")


def largest_head_score(ctx: FigureContext) -> str:
    """``"largest induction score 0.93 (layer 2, head 1; at init 0.11)"``: the task's own
    head score (the first in `HEAD_SCORES` that not every task has, else one every task
    has) at its best head."""
    scores = ctx.head_scores
    ranked = sorted(scores_present(scores),
                    key=lambda name: getattr(HEAD_SCORES.get(name), "of_every_task", False))
    for name in ranked:
        found = [(head[name]["value"], entry["layer"], h, head[name]["init"])
                 for entry in scores.values() for h, head in enumerate(entry["heads"])
                 if name in head and head[name]["value"] is not None]
        if found:
            value, layer, head, init = max(found)
            at_init = f"; at init {init:.2f}" if init is not None else ""
            return (f"largest {head_score_label(name)} score {value:.2f} (layer {layer}, "
                    f"head {head}{at_init})")
    return ""


def heads_caption(ctx: FigureContext) -> str:
    looked = ", ".join(head_score_label(name) for name in scores_present(ctx.head_scores))
    return (f"Each head's attention weights on the first held-out sequence, the tokens "
            f"included (rows: the attention layers in stack order; rows sum to 1). Each title "
            f"gives that head's scores over {ctx.head_sequences} held-out sequences: "
            f"{looked}.")


def head_scores_caption(ctx: FigureContext) -> str:
    """Every declared head score's definition (`HeadScore.definition`), in order."""
    defined = [f"{score.label}{' is' if index == 0 else ','} {score.definition}"
               for index, score in enumerate(HEAD_SCORES.values())]
    return ("Each head's scores on held-out sequences, layer by layer, beside the same heads "
            f"at init: {'; '.join(defined)}.")
