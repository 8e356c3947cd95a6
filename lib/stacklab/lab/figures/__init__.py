"""Plotly figures of what a position table learned, for notebooks, the app and reports.

Every function returns a `plotly.graph_objects.Figure` built from plain tensors or a `Run`;
nothing here imports streamlit, so the same figures show in Jupyter (``fig.show()``), in the
app (``st.plotly_chart(fig)``) and in `stacklab.lab.reports.html`. The trained length T is
marked wherever it matters: rows ``>= T`` of a table never take part in training.

The package: `style` (what all figures share), `heatmaps` (position against position),
`rows` (a mark per row), `curves` (along steps or positions), `picture` (a still SVG of a
heatmap figure, for a page that must show it before plotly loads), `access` (colours that
colour-blind readers tell apart, text alternatives, a phone's copy of a figure), `catalog`, the figures of
a run declared as data (`FIGURES`, each named by its key, with `captions` for the longer
words and `context` for what they are given; `COMPARED_FIGURES`, those of several runs
at once), and `drawing`, which loops over them (`run_figures`, `figures_of_table`) and
stores what it drew (`figures_json`), and `export`, a figure as PNG, SVG or PDF
(`export(fig, "fig.pdf")`) and the still image a notebook keeps beside each chart.

Large tables are sent compactly: a heatmap is zoomed on its first `MAX_CELLS` rows, never
averaged (the title says so), and every array is float32, which plotly encodes as base64,
so a 2048-row heatmap is well under 2 MB.

>>> import torch
>>> fig = similarity_heatmap(torch.randn(2048, 32), trained_len=1024)
>>> len(fig.to_json()) < 2_000_000
True
"""

from .access import LINE_COLOURS, OKABE_ITO, PHONE_WIDTH, describe, phone_figure
from .catalog import (COMPARED_FIGURES, FIGURES, GROUPS, ComparedRun, FigureContext, FigureSpec, OnTable,
                      RunFigure, TableContext, figure_spec)
from .drawing import (Arranged, absent_from_json, absent_reasons, arrange, compared_figures, figure_entry,
                      figure_from_entry, figures_from_json, figures_json, figures_of_table,
                      pattern_figure, run_figures)
from .curves import (cosine_by_distance_plot, length_generalization_plot, length_probe_plot,
                     lengths_compared_plot, offset_scores_plot, training_curves)
from .heatmaps import (attention_heatmap, attention_snapshot_heatmaps, learned_vs_sinusoidal,
                       positional_attention_heatmap, query_key_heatmap, rows_alone_heatmap,
                       similarity_heatmap, sinusoidal_resemblance, snapshot_heatmaps)
from .picture import figure_svg, svg_img
from .export import FORMATS, export, image, mimebundle, in_kernel, use_stills_in_notebooks
from .rows import drift_plot, grad_norm_plot, pca_plot
from .style import (ANIMATION_CELLS, MAX_CELLS, MAX_FRAMES, MAX_TABLE_ROWS, SharedFigure,
                    column_width, fit_title, shared, wrap_title)

__all__ = ["similarity_heatmap", "query_key_heatmap", "positional_attention_heatmap",
           "attention_heatmap", "snapshot_heatmaps", "grad_norm_plot", "drift_plot", "pca_plot",
           "length_probe_plot", "learned_vs_sinusoidal", "training_curves", "run_figures",
           "pattern_figure", "figures_json", "figures_from_json", "figure_entry",
           "figure_from_entry", "cosine_by_distance_plot",
           "length_generalization_plot", "offset_scores_plot",
           "attention_snapshot_heatmaps", "rows_alone_heatmap", "sinusoidal_resemblance",
           "RunFigure", "FigureSpec", "FigureContext", "FIGURES", "figure_spec", "OnTable",
           "TableContext", "figures_of_table", "MAX_CELLS", "ANIMATION_CELLS",
           "MAX_FRAMES", "MAX_TABLE_ROWS", "COMPARED_FIGURES", "ComparedRun", "compared_figures",
           "absent_reasons", "absent_from_json", "lengths_compared_plot", "fit_title",
           "wrap_title", "column_width", "SharedFigure", "shared", "figure_svg",
           "svg_img", "GROUPS", "Arranged", "arrange", "describe", "phone_figure",
           "LINE_COLOURS", "OKABE_ITO", "PHONE_WIDTH", "FORMATS", "export", "image", "mimebundle",
           "use_stills_in_notebooks"]

if in_kernel():  # in Jupyter every figure keeps a still image beside its chart
    use_stills_in_notebooks()
