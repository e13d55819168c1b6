"""`ModelSpec`: the decoder's shape (dense Llama/GPT, mixture of experts, multi-head latent attention).

Plain data: no Hydra, no torch, no I/O. Validation raises `SpecError` naming the field, the value and the rule.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from autotune.core.errors import positive_int, require

# the fields of the first release: always part of a candidate id (ModelSpec.identity)
_ID_FIELDS_ALWAYS = frozenset(
    ("name", "num_layers", "hidden_size", "ffn_hidden_size", "num_heads", "num_kv_heads", "vocab_size",
     "tie_embeddings", "block", "rope_theta", "norm_eps")
)  # fmt: skip


@dataclass(frozen=True)
class ModelSpec:
    """A Llama-style decoder (RMSNorm, RoPE, GQA attention, SwiGLU MLP). `block="gpt"` describes a GPT-2/3 block
    (LayerNorm with bias, GeLU MLP with 4h; multi-head, or grouped K/V where num_kv_heads < num_heads, as Nemotron-4
    340B) so published GPT tables can be reproduced with the same code.

    Mixture of experts (`num_experts > 0`): the MoE layers replace the dense SwiGLU MLP by a router over
    `num_experts` routed SwiGLU experts of width `moe_ffn_hidden_size`, each token going to `moe_router_topk` of them,
    plus an always-on shared-expert SwiGLU of total width `moe_shared_expert_ffn_hidden_size` (0 = none; Megatron's
    --moe-shared-expert-intermediate-size is the same total). Which layers are MoE: the first `moe_first_k_dense` are
    dense (DeepSeek-V3 `first_k_dense_replace`), then every `moe_layer_freq`-th layer (Qwen2-MoE
    `decoder_sparse_step`). `moe_router`: "softmax" = softmax over the experts then top-k (Mixtral, Qwen; re-normalised
    over the chosen k when `moe_norm_topk`), "sigmoid" = sigmoid scores with a per-expert bias used only to choose
    (DeepSeek-V3's auxiliary-loss-free balancing, arXiv 2412.19437 Sec 2.1.2). `moe_capacity_factor` None = dropless.
    `moe_aux_loss_coeff`: the load-balancing loss weight (Switch Transformer, Fedus et al. 2022 Eq. 4).

    Multi-head latent attention (`attention="mla"`, DeepSeek-V2/V3, arXiv 2405.04434 Sec 2.1): queries through a
    `q_lora_rank` bottleneck (0 = a plain projection), keys and values from a `kv_lora_rank` latent, per head a
    `qk_nope_head_dim` + `qk_rope_head_dim` query/key and a `v_head_dim` value (the rope part of the key shared by
    all heads). The MLA fields must be 0 on a GQA model."""

    name: str
    num_layers: int
    hidden_size: int
    ffn_hidden_size: int
    num_heads: int
    num_kv_heads: int
    vocab_size: int
    tie_embeddings: bool = False
    block: Literal["llama", "gpt"] = "llama"
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5
    # mixture of experts (0 experts = dense)
    num_experts: int = 0
    moe_router_topk: int = 0
    moe_ffn_hidden_size: int = 0
    moe_shared_expert_ffn_hidden_size: int = 0
    moe_first_k_dense: int = 0
    moe_layer_freq: int = 1
    moe_router: Literal["softmax", "sigmoid"] = "softmax"
    moe_norm_topk: bool = True
    moe_capacity_factor: float | None = None
    moe_aux_loss_coeff: float = 0.0
    # group-limited routing (Megatron --moe-router-num-groups / --moe-router-group-topk; HF n_group / topk_group): the
    # experts split into `moe_router_num_groups` equal groups of consecutive experts, each token picks
    # `moe_router_group_topk` groups (by the sum of their top-2 scores) and its k experts inside them. DeepSeek-V3: 8
    # groups, 4 chosen, its "node-limited routing" (arXiv 2412.19437 Sec 2.1.2: "each token will be sent to at most M
    # nodes"; M = 4, Sec 4.2). 0 = no group limit. Prices the dispatch (autotune/predict/moe_dispatch.py), nothing else
    moe_router_num_groups: int = 0
    moe_router_group_topk: int = 0
    # attention kind; the MLA fields below are used by attention="mla" only
    attention: Literal["gqa", "mla"] = "gqa"
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # per-head dimension of q/k/v (GQA); null = hidden_size / num_heads. Qwen3 decouples it: 32 heads x 128 on a
    # hidden size of 2048 (Qwen/Qwen3-30B-A3B config.json `head_dim`)
    head_dim: int | None = None
    # RMSNorm on each head's query and key before RoPE (Qwen3: transformers Qwen3Attention q_norm/k_norm; Megatron-LM
    # --qk-layernorm). Exporters write it; the memory and speed models do not count its 2*head_dim weights per layer
    # and elementwise work, so it is not part of a candidate id (identity() below)
    qk_norm: bool = False
    # YaRN context extension (Peng et al. 2023, "YaRN", arXiv 2309.00071 Sec 3.4: RoPE frequencies interpolated by the
    # scale factor s and the attention logits scaled by sqrt(1/t) = 0.1 ln(s) + 1, applied to RoPE's cos and sin);
    # HF `rope_scaling: {rope_type: yarn, factor: s}`, 1.0 = plain RoPE. openai/gpt-oss-120b: factor 32. Prices the
    # unfused RoPE Megatron-Core falls back to when that attention factor is not 1 (autotune/predict/rope.py)
    yarn_scaling_factor: float = 1.0
    # sliding-window attention: `sliding_window_layers` of the layers attend to the last `sliding_window` keys before
    # each query (HF `sliding_window`, `layer_types`; Megatron window_size (W, 0): keys [i - W, i], W + 1 of them), the
    # rest full causal. openai/gpt-oss-120b: W = 128 on 18 of 36 layers (alternating; Megatron-Bridge GPTOSSProvider
    # window_size (128, 0), window_attn_skip_freq 2). 0 = none. Priced in autotune/predict/attention_terms.py
    sliding_window: int = 0
    sliding_window_layers: int = 0
    # The routed experts' gated activation clamped at +-glu_clamp before the GLU (openai/gpt-oss-120b config.json
    # swiglu_limit 7.0; Megatron activation_func_clamp_value, which Megatron-Bridge's GPT-OSS bridge sets to 7.0):
    # Megatron clamps outside its fused activation kernel (autotune/predict/glu_clamp.py). None = no clamp.
    glu_clamp: float | None = None

    def __post_init__(self) -> None:
        for f in ("num_layers", "hidden_size", "ffn_hidden_size", "num_heads", "num_kv_heads", "vocab_size"):
            positive_int(f"model.{f}", getattr(self, f))
        if self.head_dim is None:
            require(
                self.hidden_size % self.num_heads == 0,
                f"model.num_heads={self.num_heads} does not divide model.hidden_size={self.hidden_size}",
            )
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        positive_int("model.head_dim", self.head_dim)
        require(
            self.num_heads % self.num_kv_heads == 0,
            f"model.num_kv_heads={self.num_kv_heads} does not divide model.num_heads={self.num_heads}",
        )
        require(self.block in ("llama", "gpt"), f"model.block={self.block!r} must be one of llama, gpt")
        s = self.yarn_scaling_factor
        require(
            isinstance(s, (int, float)) and not isinstance(s, bool) and s >= 1.0,
            f"model.yarn_scaling_factor={s!r} must be a number >= 1 (1 = plain RoPE)",
        )
        for f in ("sliding_window", "sliding_window_layers"):
            v = getattr(self, f)
            require(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0, f"model.{f}={v!r} must be an integer >= 0"
            )
        require(
            self.sliding_window_layers <= self.num_layers
            and (self.sliding_window > 0) == (self.sliding_window_layers > 0),
            f"model.sliding_window_layers={self.sliding_window_layers} must be in 1..num_layers={self.num_layers} "
            f"exactly when model.sliding_window={self.sliding_window} > 0",
        )
        require(
            self.glu_clamp is None
            or (
                isinstance(self.glu_clamp, (int, float)) and not isinstance(self.glu_clamp, bool) and self.glu_clamp > 0
            ),
            f"model.glu_clamp={self.glu_clamp!r} must be null or a number > 0",
        )
        self._check_moe()
        self._check_mla()

    def _check_moe(self) -> None:
        e, k = self.num_experts, self.moe_router_topk
        for f in ("num_experts", "moe_router_topk", "moe_ffn_hidden_size", "moe_shared_expert_ffn_hidden_size",
                  "moe_first_k_dense"):  # fmt: skip
            v = getattr(self, f)
            require(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0, f"model.{f}={v!r} must be an integer >= 0"
            )
        positive_int("model.moe_layer_freq", self.moe_layer_freq)
        if e == 0:
            moe_set = [f for f in ("moe_router_topk", "moe_ffn_hidden_size", "moe_shared_expert_ffn_hidden_size",
                                   "moe_first_k_dense") if getattr(self, f)]  # fmt: skip
            require(not moe_set, f"model.{moe_set[0] if moe_set else ''} is set on a dense model (num_experts=0)")
            return
        require(self.block == "llama", f"model.num_experts={e} needs block=llama (block={self.block!r})")
        require(1 <= k <= e, f"model.moe_router_topk={k} must be in 1..num_experts={e}")
        positive_int("model.moe_ffn_hidden_size", self.moe_ffn_hidden_size)
        require(
            self.moe_router in ("softmax", "sigmoid"),
            f"model.moe_router={self.moe_router!r} must be one of softmax, sigmoid",
        )
        cf = self.moe_capacity_factor
        require(
            cf is None or (isinstance(cf, (int, float)) and not isinstance(cf, bool) and cf > 0),
            f"model.moe_capacity_factor={cf!r} must be null (dropless) or > 0",
        )
        require(self.moe_aux_loss_coeff >= 0, f"model.moe_aux_loss_coeff={self.moe_aux_loss_coeff!r} must be >= 0")
        self._check_groups()
        require(
            self.num_moe_layers >= 1,
            f"model.moe_first_k_dense={self.moe_first_k_dense} leaves no MoE layer of num_layers={self.num_layers}",
        )

    def _check_groups(self) -> None:
        g, top = self.moe_router_num_groups, self.moe_router_group_topk
        for f, v in (("moe_router_num_groups", g), ("moe_router_group_topk", top)):
            require(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0, f"model.{f}={v!r} must be an integer >= 0"
            )
        if g == 0:
            require(top == 0, f"model.moe_router_group_topk={top} needs model.moe_router_num_groups > 0")
            return
        require(
            self.num_experts % g == 0,
            f"model.moe_router_num_groups={g} must divide num_experts={self.num_experts} (equal expert groups)",
        )
        require(1 <= top <= g, f"model.moe_router_group_topk={top} must be in 1..moe_router_num_groups={g}")

    def _check_mla(self) -> None:
        mla = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
        require(self.attention in ("gqa", "mla"), f"model.attention={self.attention!r} must be one of gqa, mla")
        for f in mla:
            v = getattr(self, f)
            require(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0, f"model.{f}={v!r} must be an integer >= 0"
            )
        if self.attention == "gqa":
            bad = [f for f in mla if getattr(self, f)]
            require(
                not bad,
                f"model.{bad[0] if bad else ''}={getattr(self, bad[0]) if bad else 0} is an MLA field, but model.attention=gqa",
            )
            return
        for f in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            positive_int(f"model.{f}", getattr(self, f))
        require(
            self.qk_rope_head_dim % 2 == 0, f"model.qk_rope_head_dim={self.qk_rope_head_dim} must be even (RoPE pairs)"
        )

    def identity(self) -> dict:
        """The model part of a candidate id: every field of the first release, and a field added later (MoE, MLA)
        only where it differs from its default, so ids of stored dense results survive new fields."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "head_dim" and v == self.hidden_size // self.num_heads:
                continue  # the derived value: what every model had before the field existed
            if f.name == "qk_norm":
                continue  # export-only: no prediction depends on it
            if f.name in _ID_FIELDS_ALWAYS or v != f.default:
                out[f.name] = v
        return out

    @property
    def rope_attention_factor(self) -> float:
        """YaRN's attention factor 0.1 ln(s) + 1 (Peng et al. 2023 Sec 3.4; transformers `_compute_yarn_parameters`
        `get_mscale`, Megatron-Core `_yarn_get_mscale`), 1.0 without YaRN (s = 1). gpt-oss-120b: 1.3466."""
        s = self.yarn_scaling_factor
        return 0.1 * math.log(s) + 1.0 if s > 1.0 else 1.0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def is_moe_layer(self, layer: int) -> bool:
        """Layer `layer` (0-based) is an MoE layer: past the first k dense ones, every moe_layer_freq-th (the
        (freq-1)-th, 2freq-1-th, ... after them, as Qwen2-MoE's `(layer_idx + 1) % decoder_sparse_step == 0`)."""
        if not self.is_moe or layer < self.moe_first_k_dense:
            return False
        return (layer - self.moe_first_k_dense + 1) % self.moe_layer_freq == 0

    @property
    def num_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.num_layers))

    @property
    def q_dim(self) -> int:
        """Width of the query projection's output and of the attention output (= hidden_size unless head_dim is
        decoupled)."""
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    def attention_params(self) -> int:
        """One block's attention projections (and MLA's two latent RMSNorm weights), no biases."""
        h = self.hidden_size
        if self.attention == "gqa":
            return 2 * h * (self.q_dim + self.kv_dim)  # wq, wk, wv, wo (q_dim = heads * head_dim)
        return self._mla_matmul_params() + (self.q_lora_rank + self.kv_lora_rank)  # + q_norm, kv_norm

    def _mla_matmul_params(self) -> int:
        """MLA's projections (DeepSeek-V2, arXiv 2405.04434 Sec 2.1.2-2.1.3, Eqs. 9-14; DeepSeek-V3 model code):
        wq_a h->q_lora then wq_b q_lora->heads*(nope+rope) (or one wq h->heads*(nope+rope) when q_lora_rank=0),
        wkv_a h->kv_lora+rope (the latent and the shared rope key), wkv_b kv_lora->heads*(nope+v), wo heads*v->h."""
        h, n = self.hidden_size, self.num_heads
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        q = (h * self.q_lora_rank + self.q_lora_rank * n * qk) if self.q_lora_rank else h * n * qk
        kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank * n * (
            self.qk_nope_head_dim + self.v_head_dim
        )
        return q + kv + n * self.v_head_dim * h

    def _attention_matmul_params(self) -> int:
        return (
            self._mla_matmul_params() if self.attention == "mla" else 2 * self.hidden_size * (self.q_dim + self.kv_dim)
        )

    def mlp_params(self, layer: int, active: bool = False) -> int:
        """Block `layer`'s MLP: a dense SwiGLU (3·h·f), or on an MoE layer the router h·E (+E selection bias with the
        sigmoid router, not trained by gradient), the routed experts 3·h·F_moe each (all E, or the top-k a token
        uses when `active`) and the shared-expert SwiGLU 3·h·F_shared (Megatron-LM theoretical_memory_usage.py and
        DeepSeek-V3, arXiv 2412.19437 Sec 2.1.2)."""
        h = self.hidden_size
        if not self.is_moe_layer(layer):
            return 3 * h * self.ffn_hidden_size
        experts = self.moe_router_topk if active else self.num_experts
        bias = self.num_experts if self.moe_router == "sigmoid" and not active else 0
        router = h * self.num_experts + bias
        return router + experts * 3 * h * self.moe_ffn_hidden_size + 3 * h * self.moe_shared_expert_ffn_hidden_size

    def layer_params(self, layer: int | None = None) -> int | float:
        """Parameters of one transformer block, counted exactly for the block as implemented in bench_model. With
        MoE layers the blocks differ: pass `layer`; without it the mean over the blocks (a float when they differ)."""
        h, f = self.hidden_size, self.ffn_hidden_size
        if self.block == "gpt":  # QKV + proj with biases, 2 LayerNorms (w+b), MLP h->f->h with biases
            q, k = self.q_dim, self.kv_dim  # multi-head: q = k = h, 4h^2 + 4h; grouped K/V (Nemotron-4 340B) smaller
            return 2 * h * (q + k) + q + 2 * k + h + 2 * h * f + f + h + 4 * h
        if layer is None:
            if not self.is_moe:
                return self.layer_params(0)
            total = sum(self.layer_params(i) for i in range(self.num_layers))
            return total // self.num_layers if total % self.num_layers == 0 else total / self.num_layers
        norms = 2 * h  # attention_norm, ffn_norm (RMSNorm weight only)
        return self.attention_params() + self.mlp_params(layer) + norms

    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    def head_params(self) -> int:
        """Output projection; zero extra parameters when tied to the embedding."""
        return 0 if self.tie_embeddings else self.vocab_size * self.hidden_size

    def num_params(self) -> int:
        final_norm = self.hidden_size if self.block == "llama" else 2 * self.hidden_size
        if self.block == "gpt":
            blocks = self.num_layers * self.layer_params()
        else:
            blocks = sum(self.layer_params(i) for i in range(self.num_layers))
        return self.embedding_params() + blocks + final_norm + self.head_params()

    def _matmul_params(self, active: bool) -> int:
        h, f = self.hidden_size, self.ffn_hidden_size
        if self.block == "gpt":
            return self.num_layers * (2 * h * (self.q_dim + self.kv_dim) + 2 * h * f) + self.vocab_size * h
        mlp = 0
        for i in range(self.num_layers):  # the sigmoid router's selection bias is no matmul weight
            bias = self.num_experts if self.is_moe_layer(i) and self.moe_router == "sigmoid" and not active else 0
            mlp += self.mlp_params(i, active) - bias
        return self.num_layers * self._attention_matmul_params() + mlp + self.vocab_size * h

    def matmul_params(self) -> int:
        """Parameters that take part in a matmul: every block's weight matrices (all routed experts of an MoE layer)
        plus the output head (the head multiplies even when tied; the embedding lookup is a gather, no FLOPs)."""
        return self._matmul_params(active=False)

    def active_matmul_params(self) -> int:
        """The matmul parameters one token passes through: as matmul_params, but of an MoE layer's routed experts
        only the top-k (plus the router and the shared expert). Equals matmul_params on a dense model."""
        return self._matmul_params(active=True)

    def attention_flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token of the score and value matmuls over all layers, causal (half the positions):
        forward 2·s·heads·(d_qk + d_v)/2 per layer, ×3 with backward. GQA: d_qk = d_v = head_dim, i.e. 6·L·s·h
        (PaLM, Chowdhery et al. 2022, App. B: 12·L·H·Q·T, halved for causal masking). MLA: d_qk = nope + rope,
        d_v = v_head_dim (DeepSeek-V2 Sec 2.1.2: the scores use the concatenated nope and rope parts)."""
        if self.attention == "mla":
            d_qk, d_v = self.qk_nope_head_dim + self.qk_rope_head_dim, self.v_head_dim
        else:
            d_qk = d_v = self.head_dim
        # sliding-window layers: 2 x the mean keys per query, W' - W'(W'-1)/(2s) with W' = W + 1 keys (Megatron-Bridge
        # src/megatron/bridge/training/utils/flop_utils.py @ 067f987d, "average causal sliding-window context length"),
        # in place of the causal s/2 x 2 = s
        full = self.num_layers - self.sliding_window_layers
        w = self.sliding_window + 1
        keys = 2.0 * (w - w * (w - 1) / (2.0 * seq_len)) if w < seq_len else float(seq_len)
        return 3.0 * (full * seq_len + self.sliding_window_layers * keys) * self.num_heads * (d_qk + d_v)

    def flops_per_token(self, seq_len: int) -> float:
        """Training (forward + backward) model FLOPs per token.

        6·N_active (Kaplan et al. 2020, "Scaling Laws", Sec 2.1: 2 FLOPs per multiply-add forward, ×3 with backward)
        with N_active the matmul parameters a token passes through, counted exactly (GQA's smaller K/V projections,
        SwiGLU's three matrices, MLA's projections, the output head; of an MoE layer the router, the top-k routed
        experts and the shared expert, as DeepSeek-V3's "37B activated" and Megatron-LM's
        num_floating_point_operations count MoE by moe_router_topk experts), plus the attention score and value
        matmuls (attention_flops_per_token). Recompute is not counted (model FLOPs, not hardware FLOPs; Korthikanti
        et al. 2022 Eq. 7 vs 8)."""
        return 6.0 * self.active_matmul_params() + self.attention_flops_per_token(seq_len)
