"""The ``metrics.json`` record of a run: its settings' outcome, curves, and every
score of its position tables and attentions, as `RunAnalysis` measured them.

A table longer than `METRICS_ROWS` rows lists its first `METRICS_ROWS` (every trained row
among them) and summarises the rest (``rows_listed``, ``rest``), so the file stays small
for any table.
"""

from __future__ import annotations

METRICS_ROWS = 4096  # rows listed per table in metrics.json (the longest T the settings allow)


def metrics_record(run) -> dict:
    """The ``metrics.json`` record of ``run`` (a `stacklab.Run`)."""
    analysis = run.analysis
    scores = analysis.position_table_scores() if run.position_nodes else {}
    without = analysis.attention_pattern()
    attention = analysis.head_scores()
    return {
        "task": run.task.name,
        "seq_len": run.config.seq_len,
        "steps": run.step,
        "seconds": round(run.seconds, 4),
        "device": run.device,
        "final": run.final,
        "history": list(run.history),
        "position_tables": {node: _table_metrics(run, node, scores[node])
                            for node in run.position_nodes},
        **({"length_generalization": run.length_generalization}
           if run.length_generalization else {}),
        **({"attention_by_position": without} if without else {}),
        **({"attention": attention} if attention else {}),
    }


def _table_metrics(run, node: str, scores: dict) -> dict:
    grad, drift = run.row_grad_norm[node], run.row_drift(node)
    listed = {"max_len": int(grad.shape[0]), "row_grad_norm": grad[:METRICS_ROWS].tolist(),
              "row_drift": drift[:METRICS_ROWS].tolist(), "scores": scores}
    if grad.shape[0] > METRICS_ROWS:
        listed["rows_listed"] = METRICS_ROWS
        listed["rest"] = {name: {"min": float(values[METRICS_ROWS:].min()),
                                 "max": float(values[METRICS_ROWS:].max()),
                                 "mean": float(values[METRICS_ROWS:].mean())}
                          for name, values in (("row_grad_norm", grad), ("row_drift", drift))}
    return listed
