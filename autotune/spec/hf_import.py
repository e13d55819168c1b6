"""Read a Hugging Face `config.json` (Llama, Mistral, Qwen2/3, and the MoE families of hf_moe.py) into a ModelSpec: `model=hf model.config_path=PATH`.

Keys read (transformers' LlamaConfig / MistralConfig / Qwen2Config names): hidden_size, intermediate_size,
num_hidden_layers, num_attention_heads, num_key_value_heads (default: num_attention_heads), vocab_size,
tie_word_embeddings (default false, as in all three config classes), rope_theta (default 10000.0),
rms_norm_eps (default 1e-6), max_position_embeddings (read and checked, kept in `HFModelConfig`; ModelSpec has no
such field). Every user mistake is a one-line ValueError naming the file, the key, the value and the rule.

What a ModelSpec cannot hold, and how it is handled:
- Qwen2's q/k/v projections have biases (hard-wired in transformers' Qwen2Attention): h + 2*kv_dim parameters per
  layer, not counted by ModelSpec (27,648 of Qwen2.5-0.5B's 494,032,768 parameters, 0.006%; FLOPs: additions only).
  `HFModelConfig.bias_params()` returns that number; Llama-style `attention_bias`/`mlp_bias` are counted the same way.
- Mistral's sliding-window attention (4096 for 7B-v0.1) is not modelled: attention FLOPs are counted as full causal,
  which over-counts only for seq_len > sliding_window.
- An explicit `head_dim` (Qwen3) becomes ModelSpec.head_dim; Qwen3's per-head q/k RMSNorm sets ModelSpec.qk_norm.
Mixture-of-experts and MLA configs (mixtral, qwen2_moe, qwen3_moe, deepseek_v3): autotune/spec/hf_moe.py.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.core.errors import InputFileError, SpecError
from autotune.core.model import ModelSpec
from autotune.spec.hf_moe import MOE_MODEL_TYPES, moe_fields

SUPPORTED_MODEL_TYPES: dict[str, str] = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    **MOE_MODEL_TYPES,
}
_ARCH_TO_TYPE = {arch: t for t, arch in SUPPORTED_MODEL_TYPES.items()}
_REQUIRED_INTS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
_MISSING = "???"  # OmegaConf's mandatory-value marker, what `model=hf` leaves when model.config_path is not given


@dataclass(frozen=True)
class HFModelConfig:
    """The keys autotune reads from a config.json, with transformers' defaults applied."""

    model_type: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int | None
    rope_theta: float
    rms_norm_eps: float
    attention_bias: bool  # q/k/v(/o) biases: always for qwen2, `attention_bias` for llama
    mlp_bias: bool
    head_dim: int | None = None  # explicit per-head dim (Qwen3); None = hidden_size / num_attention_heads
    moe: tuple[tuple[str, Any], ...] = ()  # ModelSpec's MoE/MLA fields (autotune/spec/hf_moe.py)
    notes: tuple[str, ...] = ()  # what ModelSpec does not hold, said out loud

    def bias_params(self) -> int:
        """Bias parameters ModelSpec does not count (Qwen2: q/k/v biases; Llama: attention_bias / mlp_bias)."""
        h, kv = self.hidden_size, self.num_key_value_heads * (self.hidden_size // self.num_attention_heads)
        per_layer = 0
        if self.attention_bias:
            per_layer += h + 2 * kv + (h if self.model_type == "llama" else 0)  # Qwen2 o_proj has no bias
        if self.mlp_bias:
            per_layer += 2 * self.intermediate_size + h
        return self.num_hidden_layers * per_layer


def read_hf_config(path: str | Path) -> HFModelConfig:
    """Parse and check a config.json (or a directory holding one)."""
    if path is None or str(path) in ("", _MISSING):
        raise SpecError(
            "model.config_path is required with model=hf "
            "(e.g. model=hf model.config_path=examples/hf_configs/llama-3.2-1b.json)"
        )
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        where = " (a directory must hold config.json)" if Path(path).is_dir() else ""
        raise InputFileError(f"model.config_path={str(path)!r}: no such file{where}") from None
    except PermissionError:
        raise InputFileError(f"model.config_path={str(path)!r}: permission denied") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputFileError(
            f"model.config_path={str(path)!r}: cannot read ({type(e).__name__}: {getattr(e, 'strerror', None) or e})"
        ) from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputFileError(f"{p}: not valid JSON (line {e.lineno} column {e.colno}: {e.msg})") from None
    if not isinstance(raw, dict):
        raise InputFileError(f"{p}: a config.json must hold a JSON object, got {type(raw).__name__}")
    return _parse(raw, p)


def _parse(raw: dict[str, Any], p: Path) -> HFModelConfig:
    model_type = _model_type(raw, p)
    ints = {k: _int(raw, k, p) for k in _REQUIRED_INTS}
    kv = raw.get("num_key_value_heads")
    ints["num_key_value_heads"] = ints["num_attention_heads"] if kv is None else _int(raw, "num_key_value_heads", p)
    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise InputFileError(f"{p}: hidden_act={act!r} is not supported (allowed: silu, the SwiGLU MLP)")
    head_dim = raw.get("head_dim")
    if head_dim is not None:
        head_dim = _int(raw, "head_dim", p)
    moe, notes = moe_fields(raw, model_type, p)
    if moe.get("attention") == "mla":
        head_dim = None  # MLA's per-head dims are its own fields
    max_pos = raw.get("max_position_embeddings")
    if max_pos is not None:
        max_pos = _int(raw, "max_position_embeddings", p)
    return HFModelConfig(
        model_type=model_type,
        **ints,
        tie_word_embeddings=_bool(raw, "tie_word_embeddings", False, p),
        max_position_embeddings=max_pos,
        rope_theta=_float(raw, "rope_theta", 10000.0, p),
        rms_norm_eps=_float(raw, "rms_norm_eps", 1e-6, p),
        attention_bias=True if model_type == "qwen2" else _bool(raw, "attention_bias", False, p),
        mlp_bias=_bool(raw, "mlp_bias", False, p),
        head_dim=head_dim,
        moe=tuple(moe.items()),
        notes=tuple(notes),
    )


def _model_type(raw: dict[str, Any], p: Path) -> str:
    allowed = ", ".join(SUPPORTED_MODEL_TYPES)
    model_type, archs = raw.get("model_type"), raw.get("architectures")
    if model_type is not None:
        if model_type not in SUPPORTED_MODEL_TYPES:
            seen = f" (architectures={archs!r})" if archs is not None else ""
            raise InputFileError(f"{p}: model_type={model_type!r}{seen} is not supported (allowed: {allowed})")
        return model_type
    if isinstance(archs, list) and archs and archs[0] in _ARCH_TO_TYPE:
        return _ARCH_TO_TYPE[archs[0]]
    if archs is None:
        raise InputFileError(f"{p}: missing key model_type (allowed: {allowed})")
    raise InputFileError(
        f"{p}: architectures={archs!r} is not supported (allowed: {', '.join(SUPPORTED_MODEL_TYPES.values())})"
    )


def _int(raw: dict[str, Any], key: str, p: Path) -> int:
    if key not in raw:
        raise InputFileError(f"{p}: missing key {key}")
    v = raw[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise InputFileError(f"{p}: {key}={v!r} must be an integer >= 1")
    return v


def _float(raw: dict[str, Any], key: str, default: float, p: Path) -> float:
    v = raw.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise InputFileError(f"{p}: {key}={v!r} must be a number > 0")
    return float(v)


def _bool(raw: dict[str, Any], key: str, default: bool, p: Path) -> bool:
    v = raw.get(key, default)
    if not isinstance(v, bool):
        raise InputFileError(f"{p}: {key}={v!r} must be true or false")
    return v


def _default_name(path: str | Path) -> str:
    p = Path(path)
    if p.is_dir() or p.name == "config.json":
        return (p if p.is_dir() else p.parent).resolve().name
    return p.stem


def model_from_hf_config(path: str | Path, name: str | None = None) -> ModelSpec:
    """A ModelSpec from a config.json; `name` defaults to the file stem (or the folder of a config.json)."""
    hf = read_hf_config(path)
    try:
        return ModelSpec(
            name=name or _default_name(path),
            num_layers=hf.num_hidden_layers,
            hidden_size=hf.hidden_size,
            ffn_hidden_size=hf.intermediate_size,
            num_heads=hf.num_attention_heads,
            num_kv_heads=hf.num_key_value_heads,
            vocab_size=hf.vocab_size,
            tie_embeddings=hf.tie_word_embeddings,
            block="llama",
            rope_theta=hf.rope_theta,
            norm_eps=hf.rms_norm_eps,
            head_dim=hf.head_dim,
            qk_norm=hf.model_type in ("qwen3", "qwen3_moe"),  # transformers Qwen3(Moe)Attention: q_norm, k_norm always
            **dict(hf.moe),
        )
    except ValueError as e:  # e.g. heads not dividing hidden: ModelSpec names the field and the rule
        raise InputFileError(f"{path}: {e}") from None


def freeze_resolved_yaml(resolved_yaml: str, model: ModelSpec) -> str:
    """The resolved config with `model:` holding the imported dims instead of the config.json path, so a saved sweep
    (sweep.yaml) re-loads from any working directory and a later edit of the file does not change what it meant."""
    import yaml

    doc = yaml.safe_load(resolved_yaml)
    section = doc["model"]
    doc["model"] = {
        **dataclasses.asdict(model),
        "default_seq_len": section.get("default_seq_len"),
        "default_global_batch_size": section.get("default_global_batch_size"),
        "config_path": None,
    }
    return yaml.safe_dump(doc, sort_keys=False)
