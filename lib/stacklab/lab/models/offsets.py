"""What an offset alone gives a query–key pair in models whose positions are not a table.

Rotary models (RoPE: Llama, Mistral, Pythia/GPT-NeoX, GPT-J) turn each pair of query and
key features by ``position · θ_i``; a query and key ``k`` positions apart, with the same
content, get ``cos(k · θ_i)`` from pair i, so the similarity from the offset alone is the
mean over the rotated pairs of ``cos(k · θ_i)`` (1 at offset 0). ``θ_i = base^(-2i/d)``
with ``base = rope_theta`` and ``d`` the rotary dimension (the head, or the fraction
``partial_rotary_factor`` / ``rotary_pct`` of it); ``rope_scaling`` (``rope_parameters``
in transformers 5) changes the θ_i: linear, dynamic (NTK), yarn, llama3.
ALiBi models (BLOOM, MPT) add ``-m_h · k`` to head h's score at offset k.

>>> curves = offset_curves({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
...                         "max_position_embeddings": 32, "rope_theta": 10000.0})
>>> curves.kind, curves.trained_len, round(float(curves.lines["no scaling"][0]), 3)
('rotary', 32, 1.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...ops.attention import alibi_slopes
from .header import fail

ALIBI_TYPES = ("bloom", "mpt", "falcon")  # falcon only when config says alibi
BEYOND = 4  # the figure runs to this many times the trained length
MAX_OFFSET = 1 << 17


@dataclass(frozen=True)
class OffsetCurves:
    """What each offset alone gives: ``lines`` maps a label ("no scaling", "linear ×4",
    "head 3") to a value per offset in ``offsets``; ``kind`` is rotary or alibi; the model's
    trained length is marked; ``about`` says which parameters drew it."""

    label: str
    kind: str
    offsets: np.ndarray
    lines: dict[str, np.ndarray]
    trained_len: int | None
    about: str


def _get(config: dict, *names, default=None):
    for name in names:
        if config.get(name) is not None:
            return config[name]
    return default


def _alibi(config: dict) -> bool:
    model_type = config.get("model_type")
    return model_type == "bloom" or (model_type == "mpt" and (config.get("attn_config") or {})
                                     .get("alibi", True)) or bool(config.get("alibi"))


def encoding_of(config: dict) -> str | None:
    """"rotary", "ALiBi" or None (a table, or a config that says nothing of positions)."""
    if _alibi(config):
        return "ALiBi"
    if _get(config, "rope_theta", "rope_parameters", "rotary_dim", "rotary_pct",
            "partial_rotary_factor") is not None or config.get("model_type") in (
            "llama", "mistral", "gpt_neox", "gptj", "qwen2", "gemma", "phi"):
        return "rotary"
    return None


def rope_scaling(config: dict) -> dict | None:
    """The scaling of the rotary frequencies, as ``{"type": ..., params}``; None without."""
    scaling = _get(config, "rope_scaling", "rope_parameters")
    if not isinstance(scaling, dict):
        return None
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    return None if kind == "default" else {**scaling, "type": kind}


def rotary_frequencies(dim: int, theta: float = 10000.0, scaling: dict | None = None,
                       trained_len: int = 2048, seq_len: int | None = None) -> np.ndarray:
    """θ_i of the ``dim // 2`` rotated pairs, with ``scaling`` applied (its ``type``:
    linear, dynamic, yarn or llama3) at a sequence of ``seq_len`` positions."""
    inverse = theta ** (-np.arange(0, dim // 2, dtype=np.float64) * 2 / dim)  # (dim/2,)
    if scaling is None:
        return inverse
    kind, factor = scaling["type"], float(scaling.get("factor", 1.0))
    original = int(scaling.get("original_max_position_embeddings") or trained_len)
    if kind == "linear":
        return inverse / factor
    if kind == "dynamic":  # NTK: the base grows once the sequence passes the trained length
        length = max(seq_len or original, original)
        base = theta * ((factor * length / original) - (factor - 1)) ** (dim / (dim - 2))
        return base ** (-np.arange(0, dim // 2, dtype=np.float64) * 2 / dim)
    if kind == "llama3":
        low, high = float(scaling.get("low_freq_factor", 1)), float(scaling.get("high_freq_factor", 4))
        wavelength = 2 * math.pi / inverse
        smooth = np.clip((original / wavelength - low) / (high - low), 0.0, 1.0)
        return (1 - smooth) * inverse / factor + smooth * inverse
    if kind == "yarn":  # interpolate the slow pairs, keep the fast ones, ramp between
        fast, slow = float(scaling.get("beta_fast", 32)), float(scaling.get("beta_slow", 1))

        def pair(turns: float) -> float:
            return dim * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(theta))

        low, high = max(math.floor(pair(fast)), 0), min(math.ceil(pair(slow)), dim - 1)
        ramp = np.clip((np.arange(dim // 2) - low) / (high - low or 1e-3), 0.0, 1.0)
        return inverse / factor * ramp + inverse * (1 - ramp)
    raise fail("config.json", f"rope_scaling type {str(kind)[:40]!r} is not one of linear, "
               "dynamic, yarn, llama3", "give a rope_scaling of a known type")


def rotary_similarity(offsets: np.ndarray, frequencies: np.ndarray) -> np.ndarray:
    """Mean over the rotated pairs of ``cos(offset · θ_i)``: (len(offsets),)."""
    return np.cos(offsets[:, None] * frequencies[None, :]).mean(axis=1)


def _whole(value, name: str, low: int = 1) -> int:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < low or value != int(value):
        raise fail("config.json", f"{name} is {str(value)[:40]}, not a whole number ≥ {low}",
                   "give the model's own config.json")
    return int(value)


def offset_curves(config: dict, label: str | None = None) -> OffsetCurves:
    """The `OffsetCurves` of a Hugging Face ``config`` (rotary or ALiBi), from offset 0 to
    `BEYOND` times its trained length; raises `StackError` when the config gives neither."""
    label = label or str(config.get("_name_or_path") or config.get("model_type") or "model")
    heads = _whole(_get(config, "num_attention_heads", "n_head", "n_heads", default=0),
                   "num_attention_heads")
    trained = _whole(_get(config, "max_position_embeddings", "n_positions", "max_seq_len",
                          default=2048), "max_position_embeddings")
    scaling = rope_scaling(config)
    if scaling is not None and scaling.get("original_max_position_embeddings"):
        trained = _whole(scaling["original_max_position_embeddings"],
                         "original_max_position_embeddings")
    offsets = np.arange(min(BEYOND * trained, MAX_OFFSET), dtype=np.float64)
    if _alibi(config):
        bias_max = float((config.get("attn_config") or {}).get("alibi_bias_max", 8))
        slopes = alibi_slopes(heads).double().numpy() ** (bias_max / 8)
        lines = {f"head {h}": -slope * offsets for h, slope in enumerate(slopes)}
        return OffsetCurves(label, "alibi", offsets, lines, trained,
                            f"ALiBi, {heads} heads, slopes {slopes[0]:.3g} to {slopes[-1]:.3g}")
    if encoding_of(config) is None:
        raise fail("config.json", f"a {config.get('model_type', 'model')} config names no "
                   "rotary or ALiBi positions", "give a rotary (Llama, Mistral, Pythia) or ALiBi "
                   "(BLOOM, MPT) model's config")
    hidden = _whole(_get(config, "hidden_size", "n_embd", "d_model", default=0), "hidden_size")
    head_dim = _whole(_get(config, "head_dim", default=hidden // max(heads, 1)), "head_dim", 2)
    parameters = config.get("rope_parameters") if isinstance(config.get("rope_parameters"), dict) else {}
    fraction = float(_get(parameters, "partial_rotary_factor", default=None)
                     or _get(config, "partial_rotary_factor", "rotary_pct", default=1.0))
    dim = int(config.get("rotary_dim") or head_dim * fraction)
    theta = float(_get(parameters, "rope_theta", default=None)
                  or _get(config, "rope_theta", "rotary_emb_base", default=10000.0))
    lines = {"no scaling": rotary_similarity(offsets, rotary_frequencies(dim, theta))}
    if scaling is not None:
        scaled = rotary_frequencies(dim, theta, scaling, trained, seq_len=len(offsets))
        lines[f"{scaling['type']} ×{float(scaling.get('factor', 1)):g}"] = rotary_similarity(offsets, scaled)
    return OffsetCurves(label, "rotary", offsets, lines, trained,
                        f"rotary dim {dim} of head {head_dim}, θ base {theta:g}")


def stack_offset_curves(heads: int, head_dim: int, position: str, seq_len: int,
                        label: str = "this stack") -> OffsetCurves:
    """The same for a stacklab ``attention(heads, position="rope" | "alibi")`` over a model
    width of ``heads · head_dim``, trained at ``seq_len``: RoPE turns the whole head with
    base 10000 (`stacklab.ops.attention.rope_rotate`), ALiBi uses `alibi_slopes`."""
    config = {"num_attention_heads": heads, "hidden_size": heads * head_dim,
              "max_position_embeddings": seq_len}
    if position == "alibi":
        config["model_type"] = "bloom"
    else:
        config["rope_theta"] = 10000.0
    return offset_curves(config, label)
