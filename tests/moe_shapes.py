"""Shapes the MoE tests share: tiny-moe's multi-head latent attention variant (search_spaces/model/tiny-moe.yaml
header), as config overrides."""

TINY_MLA: tuple[str, ...] = (
    "model.attention=mla",
    "model.q_lora_rank=32",
    "model.kv_lora_rank=32",
    "model.qk_nope_head_dim=16",
    "model.qk_rope_head_dim=8",
    "model.v_head_dim=16",
)
