"""autotune/predict/te_fp8.py te_expert_cast_extra_bytes: the routed experts' casts under Transformer Engine's
GroupedLinear (tex.split_quantize of every expert's input and grad_output, weights once per step), beyond the dense
MLP count, against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.core.types import FP8_RECIPES
from autotune.predict.te_fp8 import te_expert_cast_extra_bytes
from autotune.spec.config import load_config

QWEN = load_config(["model=qwen3-30b-a3b"]).model  # h 2048, f = kF = 6144, F 768, E 128, k 8, no shared expert


def _extra(recipe: str, layouts: float, copies: float = 8 * 4096, tp: int = 1, sp: bool = False) -> float:
    code = FP8_RECIPES.index(recipe)
    return float(te_expert_cast_extra_bytes(QWEN, 2, 4096, copies, code, layouts, 8, tp, 8, 1, sp))


def test_qwen3_experts_cast_k_copies_of_h_twice():
    """4,096 tokens, k 8 -> 32,768 copies on the rank (balanced), ep 8, tp 1, m 8, bf16 source (c 2).
    Activations: copies x (2h + 3F) - tokens x (h + 3f + h) = 32768 x 6400 - 4096 x 22528 = 117,440,512 elements
    (the (k - 1) x 2h = 28,672 per token: fc1 input and fc2 grad_output of the other 7 copies); weights: 3h x
    (F x 128/8 - f) = 6144 x 6144 = 37,748,736, / m 8 = 4,718,592. Hopper tensorwise, 2 layouts: read 2 + write 2 x 1
    = 4 bytes each -> 488,636,416; MXFP8 2 layouts of 1 + 1/32: 4.0625 -> 496,271,360; no recipe: 0."""
    elems = 32768 * 6400 - 4096 * 22528 + 6144 * 6144 / 8
    assert elems == 122_159_104
    assert _extra("tensorwise", 2.0) == 4 * elems == 488_636_416
    assert _extra("mxfp8", 2.0) == pytest.approx(4.0625 * elems)
    assert _extra("none", 2.0) == 0.0


def test_a_single_copy_per_token_adds_only_the_weights():
    """k copies replaced by one per token (copies = tokens) at f = kF: the activation part is 4096 x (2h + 3F) -
    4096 x (2h + 3f) < 0 (fewer fc2-input / fc1-grad elements than the dense width); at copies = tokens x f/F the
    routed widths match the dense count and only the h terms differ: 4096 x 8 x 2h - 4096 x 2h."""
    got = _extra("tensorwise", 1.0, copies=4096 * 8)
    assert got == pytest.approx(3 * (4096 * 7 * 2 * 2048 + 6144 * 6144 / 8))
    assert np.sign(_extra("tensorwise", 1.0, copies=4096)) == -1
