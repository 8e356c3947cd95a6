"""Plotly figures of what a position table learned (SPEC §9), for notebooks, the app and reports.

Every function returns a `plotly.graph_objects.Figure` built from plain tensors or a `Run`;
nothing here imports streamlit, so the same figures show in Jupyter (``fig.show()``), in the
app (``st.plotly_chart(fig)``) and in `stacklab.lab.report_html`. The trained length T is
marked wherever it matters: rows ``>= T`` of a table never take part in training.

The package: `style` (what all figures share), `heatmaps` (position against position),
`rows` (a mark per row), `curves` (along steps or positions) and `catalog`, the figures
of a run declared as data (`FIGURES`), which `run_figures` loops over.

Large tables are sent compactly: a similarity map is block-averaged down to at most
`MAX_CELLS` cells a side (the title and hover say which rows a cell covers) and every array
is float32, which plotly encodes as base64, so a 2048-row heatmap is well under 2 MB.

>>> import torch
>>> fig = similarity_heatmap(torch.randn(2048, 32), trained_len=1024)
>>> len(fig.to_json()) < 2_000_000
True
"""

from .catalog import (FIGURES, FigureContext, FigureSpec, RunFigure, figures_from_json, figures_json,
                      pattern_figure, run_figures)
from .curves import (cosine_by_distance_plot, length_generalization_plot, length_probe_plot,
                     offset_scores_plot, training_curves)
from .heatmaps import (attention_heatmap, attention_snapshot_heatmaps, learned_vs_sinusoidal,
                       positional_attention_heatmap, query_key_heatmap, rows_alone_heatmap,
                       similarity_heatmap, sinusoidal_resemblance, snapshot_heatmaps)
from .rows import drift_plot, grad_norm_plot, pca_plot
from .style import ANIMATION_CELLS, MAX_CELLS, MAX_FRAMES, MAX_TABLE_ROWS

__all__ = ["similarity_heatmap", "query_key_heatmap", "positional_attention_heatmap",
           "attention_heatmap", "snapshot_heatmaps", "grad_norm_plot", "drift_plot", "pca_plot",
           "length_probe_plot", "learned_vs_sinusoidal", "training_curves", "run_figures",
           "pattern_figure", "figures_json", "figures_from_json", "cosine_by_distance_plot",
           "length_generalization_plot", "offset_scores_plot",
           "attention_snapshot_heatmaps", "rows_alone_heatmap", "sinusoidal_resemblance",
           "RunFigure", "FigureSpec", "FigureContext", "FIGURES", "MAX_CELLS", "ANIMATION_CELLS",
           "MAX_FRAMES", "MAX_TABLE_ROWS"]
