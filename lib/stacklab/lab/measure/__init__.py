"""The numbers behind the figures, from one import: ``from stacklab import analysis``.

Each part lives in the module named by its job; this one gathers their public names:

- `stacklab.lab.measure.geometry`: a table's rows alone (`similarity`, `pca`);
- `stacklab.lab.measure.probes`: the rows sent through the real ops of the stack (attention by
  position, the class each row picks), and an attention on held-out sequences;
- `stacklab.lab.measure.lengths`: the run at other lengths (`length_probe`, `length_generalization`);
- `stacklab.lab.measure.run_scores`: every score of a run (`position_table_scores`), trained and at
  init, from the score maths of `stacklab.lab.measure.score_maths`.
"""

from __future__ import annotations

from ...ops.sin_pos import sinusoidal_table
from .geometry import PCA, pca, similarity
from .lengths import LengthProbe, length_generalization, length_probe
from .probes import (attention_after, attention_logits, attention_map, attention_without_table,
                     evaluating, positional_attention, rows_alone, rows_alone_scores)
from .run_scores import (TABLE_SCORES, finite_score, model_scores, pattern_score,
                         position_table_scores, rows_scores, score_text)

__all__ = ["similarity", "positional_attention", "attention_map", "attention_logits",
           "rows_alone", "rows_alone_scores", "pca", "PCA", "length_probe", "LengthProbe",
           "sinusoidal_table", "position_table_scores", "model_scores", "rows_scores",
           "pattern_score", "score_text", "attention_without_table", "length_generalization",
           "attention_after", "evaluating", "finite_score", "TABLE_SCORES"]
