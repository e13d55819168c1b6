"""Hugging Face config.json import: dims of the shipped example configs, transformers' defaults, one-line errors,
and `model=hf model.config_path=...` through the config loader and `autotune plan`."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.core.errors import SpecError
from autotune.spec.config import load_config
from autotune.spec.hf_import import model_from_hf_config, read_hf_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "hf_configs"
TINY = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 352,
    "num_hidden_layers": 8,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "vocab_size": 1024,
}


def write(tmp_path, doc, name="cfg.json") -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


# Published parameter counts (model cards on huggingface.co, "Model size" of the safetensors files):
#   meta-llama/Llama-3.2-1B 1,235,814,400; mistralai/Mistral-7B-v0.1 7,241,732,096;
#   Qwen/Qwen2.5-0.5B 494,032,768 ("Number of Parameters: 0.49B; Non-Embedding: 0.36B") incl. its q/k/v biases.
@pytest.mark.parametrize(
    "file,dims,params",
    [
        ("llama-3.2-1b.json", (16, 2048, 8192, 32, 8, 128256, True, 500000.0, 1e-5), 1_235_814_400),
        ("mistral-7b-v0.1.json", (32, 4096, 14336, 32, 8, 32000, False, 10000.0, 1e-5), 7_241_732_096),
        ("qwen2.5-0.5b.json", (24, 896, 4864, 14, 2, 151936, True, 1e6, 1e-6), 494_032_768),
    ],
)
def test_example_configs_match_the_model_cards(file, dims, params):
    m = model_from_hf_config(EXAMPLES / file)
    assert (
        m.num_layers,
        m.hidden_size,
        m.ffn_hidden_size,
        m.num_heads,
        m.num_kv_heads,
        m.vocab_size,
        m.tie_embeddings,
        m.rope_theta,
        m.norm_eps,
    ) == dims
    assert m.name == file.removesuffix(".json") and m.block == "llama"
    assert m.num_params() + read_hf_config(EXAMPLES / file).bias_params() == params


def test_qwen2_biases_are_counted_apart():
    # Qwen2Attention: q/k/v with bias, o without -> 24 layers x (896 + 2 * 2 heads * 64) = 27,648
    hf = read_hf_config(EXAMPLES / "qwen2.5-0.5b.json")
    assert hf.bias_params() == 24 * (896 + 2 * 128) == 27_648
    m = model_from_hf_config(EXAMPLES / "qwen2.5-0.5b.json")
    assert round((m.num_params() + hf.bias_params() - m.embedding_params()) / 1e9, 2) == 0.36  # model card
    assert read_hf_config(EXAMPLES / "mistral-7b-v0.1.json").bias_params() == 0


def test_qwen3_sets_qk_norm_like_the_preset():
    """transformers Qwen3Attention / Qwen3MoeAttention always apply q_norm and k_norm (no config key): the import and
    the search_spaces preset both say so, and Megatron exports get --qk-layernorm (issue 28); Llama has none."""
    imported = model_from_hf_config(EXAMPLES / "qwen3-235b-a22b.json")
    assert imported.qk_norm and load_config(["model=qwen3-235b-a22b"]).model.qk_norm
    assert imported.identity() == load_config(["model=qwen3-235b-a22b"]).model.identity() | {"name": imported.name}
    assert not model_from_hf_config(EXAMPLES / "llama-3.2-1b.json").qk_norm


def test_transformers_defaults_apply(tmp_path):
    doc = {k: v for k, v in TINY.items() if k != "num_key_value_heads"}
    hf = read_hf_config(write(tmp_path, doc))
    # LlamaConfig defaults: num_key_value_heads = num_attention_heads, untied, rope_theta 10000, rms_norm_eps 1e-6
    assert (hf.num_key_value_heads, hf.tie_word_embeddings, hf.rope_theta, hf.rms_norm_eps) == (8, False, 1e4, 1e-6)
    assert read_hf_config(write(tmp_path, {**TINY, "num_key_value_heads": None})).num_key_value_heads == 8


def test_architectures_alone_and_a_model_folder(tmp_path):
    doc = {k: v for k, v in TINY.items() if k != "model_type"}
    doc["architectures"] = ["MistralForCausalLM"]
    folder = tmp_path / "my-model"
    folder.mkdir()
    write(folder, doc, "config.json")
    assert read_hf_config(folder).model_type == "mistral"
    assert model_from_hf_config(folder).name == "my-model"
    assert model_from_hf_config(folder, name="custom").name == "custom"


@pytest.mark.parametrize(
    "doc,pattern",
    [
        ('{"hidden_size": 128,,}', r"not valid JSON \(line 1 column 21: Expecting property name"),
        ("", r"not valid JSON"),
        ("[1, 2]", r"must hold a JSON object, got list"),
        ({k: v for k, v in TINY.items() if k != "hidden_size"}, r"missing key hidden_size"),
        ({**TINY, "hidden_size": None}, r"hidden_size=None must be an integer >= 1"),
        ({k: v for k, v in TINY.items() if k != "vocab_size"}, r"missing key vocab_size"),
        ({**TINY, "num_hidden_layers": -2}, r"num_hidden_layers=-2 must be an integer >= 1"),
        ({**TINY, "num_attention_heads": "8"}, r"num_attention_heads='8' must be an integer >= 1"),
        ({**TINY, "intermediate_size": True}, r"intermediate_size=True must be an integer >= 1"),
        ({**TINY, "tie_word_embeddings": "yes"}, r"tie_word_embeddings='yes' must be true or false"),
        ({**TINY, "rope_theta": "1e4"}, r"rope_theta='1e4' must be a number > 0"),
        ({**TINY, "num_attention_heads": 7}, r"model.num_heads=7 does not divide model.hidden_size=128"),
        ({**TINY, "head_dim": 0}, r"head_dim=0 must be an integer >= 1"),
        ({**TINY, "model_type": "qwen3_moe", "num_experts": 8}, r"missing key num_experts_per_tok"),
        (
            {
                **TINY,
                "model_type": "qwen3_moe",
                "num_experts": 4,
                "num_experts_per_tok": 8,
                "moe_intermediate_size": 64,
            },
            r"model.moe_router_topk=8 must be in 1..num_experts=4",
        ),
        (
            {
                **TINY,
                "model_type": "qwen2_moe",
                "num_experts": 4,
                "num_experts_per_tok": 2,
                "moe_intermediate_size": 64,
                "mlp_only_layers": [1, 3],
            },
            r"mlp_only_layers=\[1, 3\] is not supported",
        ),
        ({**TINY, "hidden_act": "gelu"}, r"hidden_act='gelu' is not supported \(allowed: silu"),
        (
            {**TINY, "model_type": "whisper", "architectures": ["WhisperForConditionalGeneration"]},
            r"model_type='whisper' \(architectures=\['WhisperForConditionalGeneration'\]\) is not supported "
            r"\(allowed: llama, mistral, qwen2, qwen3, mixtral, qwen2_moe, qwen3_moe, deepseek_v3\)",
        ),
        (
            {k: v for k, v in TINY.items() if k not in ("model_type", "architectures")},
            r"missing key model_type \(allowed: llama, mistral, qwen2, qwen3, mixtral, qwen2_moe, qwen3_moe, deepseek_v3\)",
        ),
    ],
)
def test_bad_configs_give_one_line_errors(tmp_path, doc, pattern):
    p = write(tmp_path, doc)
    with pytest.raises(ValueError, match=pattern) as e:
        model_from_hf_config(p)
    assert "\n" not in str(e.value) and str(p) in str(e.value)


def test_unknown_architecture_example_is_refused():
    with pytest.raises(
        ValueError, match=r"model_type='gpt2' .* is not supported \(allowed: llama, mistral, qwen2, qwen3, mixtral"
    ):
        model_from_hf_config(EXAMPLES / "gpt2.json")


def test_missing_file_and_empty_folder(tmp_path):
    with pytest.raises(ValueError, match=r"model.config_path='.*nope.json': no such file$"):
        model_from_hf_config(tmp_path / "nope.json")
    with pytest.raises(ValueError, match=r"no such file \(a directory must hold config.json\)"):
        model_from_hf_config(tmp_path)


def test_hf_preset_through_the_config_loader():
    cfg = load_config(["model=hf", f"model.config_path={EXAMPLES / 'llama-3.2-1b.json'}", "train.seq_len=2048"])
    preset = load_config(["model=llama-3.2-1b"]).model
    assert cfg.model == preset  # the same numbers as the hand-written preset, read from config.json
    assert (cfg.train.seq_len, cfg.train.global_batch_size) == (2048, 256)
    named = load_config(["model=hf", f"model.config_path={EXAMPLES / 'qwen2.5-0.5b.json'}", "model.name=qwen"])
    assert named.model.name == "qwen"


def test_hf_preset_without_a_path_names_the_field():
    with pytest.raises(ValueError, match=r"^model.config_path is required with model=hf"):
        load_config(["model=hf"])


def test_autotune_plan_on_a_shipped_example():
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune.cli.main",
            "plan",
            "--gpus",
            "8",
            "model=hf",
            f"model.config_path={EXAMPLES / 'mistral-7b-v0.1.json'}",
            "cluster=h100-sxm-80gb",
            "--json",
            "--top",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["model"] == "mistral-7b-v0.1" and d["num_gpus"] == 8 and d["fitting"] > 0
    assert d["top"][0]["dp"] * d["top"][0]["tp"] * d["top"][0]["pp"] * d["top"][0]["cp"] == 8


def test_a_saved_sweep_keeps_the_imported_dims(tmp_path, monkeypatch):
    """sweep.yaml stores the dims read from config.json, not its (cwd-relative) path: export/resume work from any
    folder and after the file is gone."""
    from autotune.results.store import SweepStore

    src = tmp_path / "qwen.json"
    src.write_text((EXAMPLES / "qwen2.5-0.5b.json").read_text())
    monkeypatch.chdir(tmp_path)
    cfg = load_config(["model=hf", "model.config_path=qwen.json", "train.seq_len=1024"])
    store = SweepStore(tmp_path / "sweep").create(cfg.resolved_yaml, {"gpus": 8})
    src.unlink()
    monkeypatch.chdir(EXAMPLES)
    again = store.config()
    assert again.model == cfg.model and again.model.name == "qwen"
    assert again.train == cfg.train and again.train.seq_len == 1024


@pytest.mark.parametrize("name", ["mixtral-8x7b", "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3"])
def test_moe_presets_equal_their_config_json(name):
    """Each MoE preset (search_spaces/model/<name>.yaml) says what its model card's config.json says
    (examples/hf_configs/<name>.json, keys copied from the Hugging Face model card)."""

    preset = load_config([f"model={name}"]).model
    assert preset == model_from_hf_config(EXAMPLES / f"{name}.json", name=name)


def test_deepseek_v3_import_notes_what_it_does_not_model():
    notes = read_hf_config(EXAMPLES / "deepseek-v3.json").notes
    assert any("num_nextn_predict_layers=1" in n for n in notes)
    m = model_from_hf_config(EXAMPLES / "deepseek-v3.json")
    assert (m.moe_router_num_groups, m.moe_router_group_topk) == (8, 4)  # config.json n_group, topk_group
    with pytest.raises(SpecError, match="moe_router_num_groups=7 must divide num_experts=256"):
        dataclasses.replace(m, moe_router_num_groups=7)
    with pytest.raises(SpecError, match="moe_router_group_topk=9 must be in 1..moe_router_num_groups=8"):
        dataclasses.replace(m, moe_router_group_topk=9)
    assert (m.attention, m.kv_lora_rank, m.moe_router, m.moe_first_k_dense) == ("mla", 512, "sigmoid", 3)
    assert m.num_moe_layers == 58 and not m.is_moe_layer(2) and m.is_moe_layer(3)
