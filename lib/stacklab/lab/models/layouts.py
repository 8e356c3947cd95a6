"""Where known model families keep their position table, and which of its rows are
positions: one `Layout` per family, tried in order, so a checkpoint needs no ``--key``.

RoBERTa numbers its positions from ``padding_idx + 1`` (rows up to the padding index are
never used); OPT and BART add an offset of 2 to every position. Both are dropped, and
the report says how many rows were.

>>> match_layout(["h.0.attn.c_attn.weight", "transformer.wpe.weight"], {})[0].name
'gpt2'
>>> layout, key = match_layout(["embeddings.position_embeddings.weight"], {"model_type": "roberta", "pad_token_id": 1})
>>> layout.name, key, layout.first_row({"pad_token_id": 1})
('roberta', 'embeddings.position_embeddings.weight', 2)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

ROBERTA_TYPES = ("roberta", "xlm-roberta", "camembert", "longformer", "data2vec-text")
OFFSET_TYPES = ("opt", "bart", "mbart")  # learned positions shifted by 2


@dataclass(frozen=True)
class Layout:
    """One family's table: its name, the key endings it uses (any prefix before them),
    the model types it claims (empty: any), and the first row that is position 0."""

    name: str
    endings: tuple[str, ...]
    model_types: tuple[str, ...] = ()
    first_row: Callable[[dict], int] = lambda config: 0
    note: str = ""
    prefixes: tuple[str, ...] = ()  # a key starting so claims the layout without a config

    def claims(self, key: str, config: dict) -> bool:
        if not any(key == end or key.endswith("." + end) for end in self.endings):
            return False
        if not self.model_types:
            return True
        model_type = str(config.get("model_type", ""))
        return model_type in self.model_types or (not model_type and key.startswith(self.prefixes))


def _padding_rows(config: dict) -> int:
    pad = config.get("pad_token_id", 1)
    return (pad if isinstance(pad, int) and not isinstance(pad, bool) and pad >= 0 else 1) + 1


LAYOUTS: tuple[Layout, ...] = (
    Layout("gpt2", ("wpe.weight",), note="GPT-2 / GPT-Neo learned positions"),
    Layout("roberta", ("embeddings.position_embeddings.weight",), ROBERTA_TYPES,
           _padding_rows, "RoBERTa: positions start after the padding index",
           prefixes=("roberta.",)),
    Layout("bert", ("embeddings.position_embeddings.weight",),
           note="BERT learned positions"),
    Layout("opt", ("decoder.embed_positions.weight", "embed_positions.weight"), OFFSET_TYPES,
           lambda config: 2, "OPT/BART: positions are offset by 2",
           prefixes=("model.decoder.", "decoder.")),
)


def match_layout(keys, config: dict) -> tuple[Layout, str] | None:
    """The first `Layout` that claims one of ``keys`` (with the model's ``config``, {} when
    there is none), and that key; None when none does."""
    for layout in LAYOUTS:
        for key in keys:
            if layout.claims(key, config):
                return layout, key
    return None
