"""Real models' positions: the position table of a real checkpoint, read lazily
from a ``.safetensors`` file of any size, a Hugging Face model folder (sharded or not), the
local Hugging Face cache (offline) or the Hub (``hf://org/name``, by HTTP range requests);
and, for models whose positions are not a table (rotary, ALiBi), what an offset alone
gives a query–key pair, from the config.

The package: `header` (a safetensors header checked, one tensor read by seeking to it),
`source` (where the files come from), `layouts` (where each family keeps its table and
which rows are positions), `reader` (`read_position_table`) and `offsets` (`offset_curves`).
The scores and figures of a table read here are those of any table
(`stacklab.lab.reports.table_file`).
"""

from .layouts import LAYOUTS, Layout, match_layout
from .offsets import (OffsetCurves, encoding_of, offset_curves, rotary_frequencies,
                      rotary_similarity, stack_offset_curves)
from .reader import ModelTable, extract_snippet, model_config, read_position_table
from .source import cached_models, model_under, models_under

__all__ = ["read_position_table", "ModelTable", "model_config", "offset_curves", "OffsetCurves",
           "stack_offset_curves", "encoding_of", "rotary_frequencies", "rotary_similarity",
           "LAYOUTS", "Layout", "match_layout", "cached_models", "models_under",
           "model_under", "extract_snippet"]
