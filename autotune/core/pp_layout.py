"""Megatron-Core's custom pipeline layout (`train.pp_layout`, Megatron's --pipeline-model-parallel-layout) and its
multi-token-prediction modules (`train.mtp_num_layers`, --mtp-num-layers): which pipeline stage holds the embedding,
which decoder layers, the MTP modules and the loss.

The string is Megatron's (megatron/core/transformer/pipeline_parallel_layer_layout.py @ core_v0.16.1
`parse_str_to_list`): stages separated by "|", in stage order j = vpp_rank * pp + pp_rank (pipeline rank r holds
stages r, r + pp, ...); in a stage "E" is the embedding, "t" a decoder layer, "m" an MTP module, "L" the loss;
"(...)*n" and "x*n" repeat, commas are cosmetic. NVIDIA's DeepSeek-V3 recipes run "Et*4|(t*4|)*14tmL" on 16
stages (61 layers: embedding + 4, fourteen times 4, then 1 + MTP + loss; NVIDIA-NeMo/Megatron-Bridge
src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py @ 067f987d `_get_deepseek_v3_pipeline_layout`).

`validate_layer_layout` there checks what `check_pp_layout` checks: one embedding, first; one loss, last; as many
decoders as the model's layers and as many "m" as train.mtp_num_layers; no decoder after an MTP module. Whether the
stage count matches pp * vpp depends on the layout the planner tries: rule `pp_layout_stages`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from autotune.core.errors import require

LAYER_CHARS = {"E": "embedding", "t": "decoder", "m": "mtp", "L": "loss"}


@dataclass(frozen=True)
class Stage:
    """What one pipeline stage (a virtual stage under interleaving) builds."""

    decoders: int
    mtp: int
    embedding: bool
    loss: bool


def _unroll(text: str) -> str:
    s = text.replace(",", "")
    s = re.sub(r"\(([^)]+)\)\*(\d+)", lambda x: x.group(1) * int(x.group(2)), s)  # (ab|)*n
    return re.sub(r"(.)\*(\d+)", lambda x: x.group(1) * int(x.group(2)), s)  # x*n


def parse_pp_layout(text: str) -> tuple[Stage, ...]:
    """The stages of a layout string, in stage order; a one-line SpecError on a character Megatron does not know."""
    require(isinstance(text, str) and text.strip() != "", f"train.pp_layout={text!r} must be a non-empty string")
    flat = _unroll(text.strip())
    bad = sorted(set(flat) - set(LAYER_CHARS) - {"|"})
    require(
        not bad,
        f"train.pp_layout={text!r}: unknown layer character {bad[0] if bad else ''!r} (E embedding, t decoder, "
        "m mtp, L loss, | between stages; Megatron's --pipeline-model-parallel-layout)",
    )
    return tuple(Stage(st.count("t"), st.count("m"), "E" in st, "L" in st) for st in flat.split("|"))


def check_pp_layout(text: str, num_layers: int, mtp_num_layers: int) -> tuple[Stage, ...]:
    """The stages, after Megatron's checks that do not depend on the pipeline size (validate_layer_layout)."""
    stages = parse_pp_layout(text)
    flat = _unroll(text.strip()).replace("|", "")
    decoders = sum(s.decoders for s in stages)
    mtp = sum(s.mtp for s in stages)
    require(
        flat[:1] == "E" and flat.count("E") == 1,
        f"train.pp_layout={text!r}: the embedding (E) must come first, once",
    )
    require(flat[-1:] == "L" and flat.count("L") == 1, f"train.pp_layout={text!r}: the loss (L) must come last, once")
    require(
        decoders == num_layers,
        f"train.pp_layout={text!r} places {decoders} decoder layers (t); the model has num_layers={num_layers}",
    )
    require(
        mtp == mtp_num_layers,
        f"train.pp_layout={text!r} places {mtp} MTP modules (m); train.mtp_num_layers={mtp_num_layers}",
    )
    require(
        "m" not in flat or "t" not in flat[flat.index("m") :],
        f"train.pp_layout={text!r}: decoder layers (t) must come before the MTP modules (m)",
    )
    return stages


def rank_counts(stages: tuple[Stage, ...], pp: int, rank: int) -> tuple[list[int], int]:
    """Pipeline rank `rank`'s decoder layer indices (0-based, global) and its MTP modules, for pp ranks over the
    stages (stage j on rank j mod pp)."""
    layers, mtp, start = [], 0, 0
    for j, st in enumerate(stages):
        if j % pp == rank:
            layers.extend(range(start, start + st.decoders))
            mtp += st.mtp
        start += st.decoders
    return layers, mtp


@lru_cache(maxsize=32)
def train_layout(text: str | None) -> tuple[Stage, ...] | None:
    """train.pp_layout parsed (None stays None), cached for the vectorised estimators."""
    return None if text is None else parse_pp_layout(text)
