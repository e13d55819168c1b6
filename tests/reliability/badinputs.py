"""The bad-input table: malformed CLI flags, Hydra overrides, YAML trial files, cluster presets and HF config.json
files. Each case must end with exit 2 and exactly one stderr line naming the field, the value and the rule, with no
traceback and nothing written to the existing sweep folder `results/existing` (see harness.clean_error_problems).

`prepare(root)` writes the files the cases need under `root` (the cwd the CLI runs in); `all_cases()` lists the cases,
whose paths are relative to that cwd.
`runnable` drops a case whose command or `needs` file is missing; the test asserts that drops none."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from harness import REPO


@dataclass(frozen=True)
class BadInput:
    case_id: str
    argv: tuple[str, ...]
    expect: tuple[str, ...]  # substrings the one error line must contain (field and value; rule where fixed)
    subprocess: bool = False  # True: run the real console script (the rest run in-process, same code path)
    unprivileged: bool = False  # run without root's file-permission override (file permission cases)
    env: dict[str, str] = field(default_factory=dict)
    needs: str = ""  # a repo path that must exist besides the command (e.g. the HF importer's preset)

    @property
    def command(self) -> str:
        return self.argv[0]


PY_TAG = "!!python/object/apply:os.system ['touch pwned-by-yaml']"
TINY_HF = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 352,
    "num_hidden_layers": 8,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "vocab_size": 1024,
    "tie_word_embeddings": False,
    "max_position_embeddings": 2048,
}


def _write_files(root: Path) -> dict[str, Path]:
    """Every file or folder a case points at; returns name -> path."""
    import yaml

    from autotune.results.trialfile import dump_trialfile
    from autotune.spec.config import load_config

    files = root / "inputs"
    files.mkdir(parents=True, exist_ok=True)
    p: dict[str, Path] = {}
    cfg = load_config(["experiment=demo"])
    good = dump_trialfile(cfg.model, cfg.train, cfg.cluster, cfg.plan(2), files / "good.yaml")
    doc = yaml.safe_load(good.read_text())

    def trial(name: str, mutate) -> None:
        d = json.loads(json.dumps(doc))
        mutate(d)
        p[name] = files / f"{name}.yaml"
        p[name].write_text(yaml.safe_dump(d, sort_keys=False))

    trial("tf_tp_word", lambda d: d["plan"].__setitem__("tp", "two"))
    trial("tf_unknown_field", lambda d: d["plan"].__setitem__("colour", "red"))
    trial("tf_no_model", lambda d: d.pop("model"))
    trial("tf_zero_layers", lambda d: d["model"].__setitem__("num_layers", 0))
    trial("tf_tp3", lambda d: d["plan"].update(tp=3, dp=1, grad_accum_steps=16))
    raw = {
        "tf_pytag": f"autotune_trialfile: 1\nmodel: {PY_TAG}\n",
        "tf_empty": "",
        "tf_list": "- 1\n- 2\n",
        "tf_syntax": "autotune_trialfile: 1\nmodel: [unclosed\n",
        "tf_other_yaml": "name: something else\n",
    }
    for name, text in raw.items():
        p[name] = files / f"{name}.yaml"
        p[name].write_text(text)
    p["tf_binary"] = files / "tf_binary.yaml"
    p["tf_binary"].write_bytes(b"\xff\xfe\x00garbage\x80\x81")
    p["tf_unreadable"] = files / "tf_unreadable.yaml"
    shutil.copy(good, p["tf_unreadable"])
    os.chmod(p["tf_unreadable"], 0)
    p["a_dir"] = files / "a_dir"
    p["a_dir"].mkdir(exist_ok=True)
    p["a_file"] = files / "a_file"
    p["a_file"].write_text("not a folder\n")

    hf = {"hf_bad_json": '{"hidden_size": 128,,}', "hf_empty": "", "hf_list": "[1, 2]"}
    for name, text in hf.items():
        p[name] = files / f"{name}.json"
        p[name].write_text(text)
    for name, change in {
        "hf_arch": {"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper"},
        "hf_no_hidden": {"hidden_size": None},
        "hf_neg_layers": {"num_hidden_layers": -2},
        "hf_str_heads": {"num_attention_heads": "8"},
        "hf_heads_7": {"num_attention_heads": 7},
    }.items():
        d = {k: v for k, v in {**TINY_HF, **change}.items() if v is not None}
        p[name] = files / f"{name}.json"
        p[name].write_text(json.dumps(d))
    p["hf_unreadable"] = files / "hf_unreadable.json"
    p["hf_unreadable"].write_text(json.dumps(TINY_HF))
    os.chmod(p["hf_unreadable"], 0)
    return p


def _write_spaces(root: Path) -> Path:
    """A copy of search_spaces/ with broken cluster presets (a user's own preset files)."""
    spaces = root / "spaces"
    if not spaces.exists():
        shutil.copytree(REPO / "search_spaces", spaces)
    cpu = (REPO / "search_spaces" / "cluster" / "cpu.yaml").read_text()
    broken = {
        "neg-memory": cpu.replace("device_memory_bytes: 4294967296", "device_memory_bytes: -1"),
        "str-flops": cpu.replace("peak_flops_bf16: 5.0e10", "peak_flops_bf16: fast"),
        "typo-key": cpu.replace("gpus_per_node: 8", "gpus_per_nod: 8"),
        "py-tag": cpu.replace("name: cpu", f"name: {PY_TAG}"),
        "empty": "",
        "efficiency": cpu.replace("matmul_efficiency: 0.5", "matmul_efficiency: 1.7"),
        "no-hbm": "\n".join(ln for ln in cpu.splitlines() if not ln.startswith("hbm_bw_bytes_per_s")),
    }
    for name, text in broken.items():
        (spaces / "cluster" / f"{name}.yaml").write_text(text)
    return spaces


def _write_existing_sweep(root: Path) -> Path:
    """A real sweep folder (store API) the bad inputs point at; its file hashes must not change."""
    from autotune.results.schema import row_from_spec
    from autotune.results.store import SweepStore, trial_id_for
    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config

    cfg = load_config(["experiment=demo"])
    store = SweepStore(root / "results" / "existing")
    if not store.exists():
        store.create(cfg.resolved_yaml, {"gpus": 2, "backend": "simulate", "overrides": ["experiment=demo"]})
        spec = make_spec(cfg, cfg.plan(2), sweep_id="existing", backend="simulate")
        row = row_from_spec(spec)
        row.update(
            trial_id=trial_id_for(spec.candidate_id),
            status="ok",
            tokens_per_s=1000.0,
            tokens_per_s_per_gpu=500.0,
            mfu=0.1,
            peak_mem_allocated_bytes=2**28,
            timed_steps=3,
        )
        store.write_row(row)
    (root / "results" / "empty").mkdir(parents=True, exist_ok=True)
    return store.root


def runnable(cases: list[BadInput], commands: set[str]) -> list[BadInput]:
    return [c for c in cases if c.command in commands and (not c.needs or (REPO / c.needs).exists())]


def prepare(root: Path) -> None:
    """Write every input file, the broken presets and the existing sweep folder under `root` (the CLI's cwd)."""
    _write_files(root)
    _write_spaces(root)
    _write_existing_sweep(root)


def all_cases() -> list[BadInput]:
    return (
        _flag_cases()
        + _override_cases()
        + _file_cases(_relative_paths(), "spaces")
        + _sweep_folder_cases(_relative_paths())
    )


def _relative_paths() -> dict[str, Path]:
    """The names `_write_files` creates, relative to the CLI's cwd (so case argv does not depend on the tmp folder)."""
    names = [
        "tf_tp_word",
        "tf_unknown_field",
        "tf_no_model",
        "tf_zero_layers",
        "tf_tp3",
        "tf_pytag",
        "tf_empty",
        "tf_list",
        "tf_syntax",
        "tf_other_yaml",
        "tf_binary",
        "tf_unreadable",
    ]
    p = {n: Path("inputs") / f"{n}.yaml" for n in names}
    p.update(
        {
            n: Path("inputs") / f"{n}.json"
            for n in [
                "hf_bad_json",
                "hf_empty",
                "hf_list",
                "hf_arch",
                "hf_no_hidden",
                "hf_neg_layers",
                "hf_str_heads",
                "hf_heads_7",
                "hf_unreadable",
            ]
        }
    )
    p["a_dir"], p["a_file"] = Path("inputs/a_dir"), Path("inputs/a_file")
    return p


def _flag_cases() -> list[BadInput]:
    c = BadInput
    return [
        c("plan-gpus-zero", ("plan", "--gpus", "0"), ("--gpus", "0"), subprocess=True),
        c("plan-gpus-negative", ("plan", "--gpus", "-4"), ("--gpus", "-4")),
        c("plan-gpus-word", ("plan", "--gpus", "eight"), ("--gpus", "eight")),
        c("plan-gpus-float", ("plan", "--gpus", "2.5"), ("--gpus", "2.5")),
        c("plan-gpus-missing", ("plan",), ("--gpus",)),
        c("plan-top-zero", ("plan", "--gpus", "8", "--top", "0"), ("--top", "0")),
        c("plan-unknown-flag", ("plan", "--gpus", "8", "--frobnicate"), ("--frobnicate",)),
        c("plan-out-ext", ("plan", "--gpus", "8", "-o", "plan.txt"), ("plan.txt",)),
        c("plan-out-under-file", ("plan", "--gpus", "8", "-o", "inputs/a_file/plan.parquet"), ("a_file",)),
        c("plan-out-is-dir", ("plan", "--gpus", "8", "-o", "inputs/a_dir"), ("a_dir",)),
        c("bench-nproc-zero", ("bench", "--nproc", "0"), ("--nproc", "0")),
        c("bench-steps-zero", ("bench", "--nproc", "1", "--steps", "0"), ("--steps", "0")),
        c("sweep-gpus-zero", ("sweep", "--gpus", "0", "--backend", "simulate"), ("--gpus", "0")),
        c("sweep-backend-unknown", ("sweep", "--gpus", "4", "--backend", "mars"), ("--backend", "mars")),
        c(
            "sweep-strategy-unknown",
            ("sweep", "--gpus", "4", "--backend", "simulate", "--strategy", "psychic"),
            ("--strategy", "psychic"),
        ),
        c(
            "sweep-max-trials-zero",
            ("sweep", "--gpus", "4", "--backend", "simulate", "--max-trials", "0"),
            ("--max-trials", "0"),
        ),
        c(
            "sweep-parallel-zero",
            ("sweep", "--gpus", "4", "--backend", "simulate", "--parallel", "0"),
            ("--parallel", "0"),
        ),
        c("submit-gpus-zero", ("submit", "--dry-run", "--gpus", "0"), ("--gpus", "0")),
        c(
            "sweep-id-escapes",
            ("sweep", "--gpus", "4", "--backend", "simulate", "--sweep-id", "../../escape"),
            ("--sweep-id", "../../escape"),
        ),
        c("netbench-gpus-one", ("netbench", "--gpus", "1"), ("--gpus", "1", ">= 2"), subprocess=True),
        c("netbench-gpus-word", ("netbench", "--gpus", "x"), ("--gpus", "x")),
        c("netbench-backend-unknown", ("netbench", "--gpus", "2", "--backend", "mars"), ("--backend", "mars")),
        c("netbench-sizes-word", ("netbench", "--gpus", "2", "--sizes", "abc"), ("--sizes", "abc")),
        c("netbench-sizes-one", ("netbench", "--gpus", "2", "--sizes", "0"), ("--sizes", "0")),
        c("netbench-iters-zero", ("netbench", "--gpus", "2", "--iters", "0"), ("--iters", "0")),
        c("netbench-cluster-unknown", ("netbench", "--gpus", "2", "cluster=nope"), ("cluster", "nope", "not a preset")),
        c("netbench-output-not-yaml", ("netbench", "--gpus", "2", "-o", "net.txt"), ("-o", "net.txt", ".yaml")),
        c("devbench-output-not-yaml", ("devbench", "-o", "dev.txt"), ("-o", "dev.txt", ".yaml")),
        c("devbench-cap-zero", ("devbench", "--cap", "0"), ("--cap", "0")),
        c("devbench-cluster-unknown", ("devbench", "cluster=nope"), ("cluster", "nope", "not a preset")),
    ]


def _override_cases() -> list[BadInput]:
    c = BadInput
    plan8 = ("plan", "--gpus", "8")
    est = ("estimate",)
    cases = [
        c("model-unknown-preset", (*plan8, "model=llama-9"), ("model", "llama-9", "not a preset"), subprocess=True),
        c("cluster-unknown-preset", (*plan8, "cluster=tpu-v5"), ("cluster", "tpu-v5", "not a preset")),
        c("experiment-unknown", (*plan8, "experiment=nope"), ("experiment", "nope")),
        c("layers-word", (*plan8, "model.num_layers=abc"), ("model.num_layers", "abc", "integer")),
        c("layers-zero", (*plan8, "model.num_layers=0"), ("model.num_layers", "0", ">= 1")),
        c("hidden-negative", (*plan8, "model.hidden_size=-128"), ("model.hidden_size", "-128")),
        c("heads-not-dividing-hidden", (*plan8, "model.num_heads=7"), ("num_heads", "7", "hidden_size")),
        c("kv-not-dividing-heads", (*plan8, "model.num_kv_heads=3"), ("num_kv_heads", "3", "does not divide")),
        c("vocab-float", (*plan8, "model.vocab_size=1.5"), ("model.vocab_size", "1.5")),
        c("tie-maybe", (*plan8, "model.tie_embeddings=maybe"), ("model.tie_embeddings", "maybe")),
        c("model-unknown-key", (*plan8, "model.colour=red"), ("model.colour",)),
        c("seq-zero", (*plan8, "train.seq_len=0"), ("train.seq_len", "0")),
        c("seq-list", (*plan8, "train.seq_len=[1,2]"), ("train.seq_len",)),
        c("gbs-negative", (*plan8, "train.global_batch_size=-1"), ("train.global_batch_size", "-1")),
        c(
            "fp8-delayed-not-megatron",
            (*est, "train.fp8_delayed_scaling=true"),
            ("train.fp8_delayed_scaling=True", "framework=bench_model", "Megatron-Core"),
        ),
        c(
            "loss-chunks-not-torchtitan",
            (*est, "train.loss_chunks=8"),
            ("train.loss_chunks=8", "framework=bench_model", "torchtitan"),
        ),
        c("precision-fp8", (*plan8, "train.precision=fp8"), ("train.precision", "fp8")),
        c(
            "tokens-not-multiple",
            (*plan8, "train.global_batch_tokens=1000"),
            ("train.global_batch_tokens", "1000", "train.seq_len"),
        ),
        c("param-dtype-int4", (*plan8, "train.param_dtype=int4"), ("train.param_dtype", "int4")),
        c("framework-foo", (*plan8, "train.framework=foo"), ("train.framework", "foo", "megatron")),
        c("space-tp-zero", (*plan8, "space.tp=[1,0]"), ("space.tp", "0")),
        c("space-tp-empty", (*plan8, "space.tp=[]"), ("space.tp", "at least one")),
        c("space-zero-stage-4", (*plan8, "space.zero_stage=[4]"), ("space.zero_stage", "4")),
        c("space-recompute-half", (*plan8, "space.recompute=[half]"), ("space.recompute", "half")),
        c("space-sp-yes", (*plan8, "space.sequence_parallel=[yes]"), ("space.sequence_parallel", "yes")),
        c("space-compile-ints", (*plan8, "space.compile=[1,2]"), ("space.compile", "1", "true/false")),
        c(
            "space-offload-gpu",
            (*plan8, "space.offload=[none,gpu]"),
            ("space.offload", "gpu", "none, optimizer, params"),
        ),
        c(
            "space-offload-no-host-memory",
            (*plan8, "space.offload=[none,optimizer]", "cluster.host_memory_bytes_per_gpu=null"),
            ("plan.offload=optimizer", "cluster.host_memory_bytes_per_gpu"),
        ),
        c(
            "host-memory-negative",
            (*plan8, "cluster.host_memory_bytes_per_gpu=-1"),
            ("cluster.host_memory_bytes_per_gpu", "-1"),
        ),
        c("space-fp8-bar", (*plan8, "space.fp8=[none,bar]"), ("space.fp8", "bar", "rowwise")),
        c("space-headroom-2", (*plan8, "space.memory_headroom=2.0"), ("space.memory_headroom", "2.0")),
        c("space-min-margin-negative", (*plan8, "space.min_margin_sigma=-1"), ("space.min_margin_sigma", "-1")),
        c("space-min-margin-text", (*plan8, "space.min_margin_sigma=abc"), ("space.min_margin_sigma", "abc")),
        c(
            "cluster-expandable-maybe",
            (*plan8, "cluster.expandable_segments=maybe"),
            ("cluster.expandable_segments", "maybe"),
        ),
        c("gpus-per-node-zero", (*plan8, "cluster.gpus_per_node=0"), ("cluster.gpus_per_node", "0")),
        c("device-memory-negative", (*plan8, "cluster.device_memory_bytes=-1"), ("cluster.device_memory_bytes", "-1")),
        c("efficiency-above-one", (*plan8, "cluster.matmul_efficiency=1.5"), ("cluster.matmul_efficiency", "1.5")),
        c(
            "memory-efficiency-above-one",
            (*plan8, "cluster.memory_efficiency=1.5"),
            ("cluster.memory_efficiency", "1.5"),
        ),
        c("hbm-bw-negative", (*plan8, "cluster.hbm_bw_bytes_per_s=-1"), ("cluster.hbm_bw_bytes_per_s", "-1")),
        c("sweep-max-trials-key-zero", (*plan8, "sweep.max_trials=0"), ("sweep.max_trials", "0")),
        c("sweep-timeout-negative", (*plan8, "sweep.timeout_s=-5"), ("sweep.timeout_s", "-5")),
        c("top-level-unknown-key", (*plan8, "foo.bar=1"), ("foo",)),
        c("override-unparsable", (*plan8, "model.num_layers=[1"), ("model.num_layers",)),
        c("override-no-equals", (*plan8, "model.num_layers"), ("model.num_layers",)),
        c("impossible-batch", (*plan8, "train.global_batch_size=1", "space.cp=[1]", "space.pp=[1]"), ("8",)),
        c("plan-tp3-heads", (*est, "plan.tp=3"), ("tp=3", "num_heads=8"), subprocess=True),
        c("plan-tp-word", (*est, "plan.tp=two"), ("plan.tp", "two")),
        c("framework-layout", (*est, "train.framework=deepspeed", "plan.tp=2"), ("deepspeed:", "tp=2", "tensor")),
        c(
            "framework-nanotron-fp8",
            (*est, "train.framework=nanotron", "cluster=h100-sxm-80gb", "plan.fp8=tensorwise"),
            ("nanotron:", "fp8=tensorwise", "must be none"),
        ),
        c(
            "framework-torchtitan-no-sp",
            (*est, "train.framework=torchtitan", "plan.tp=2"),
            ("torchtitan:", "tp=2", "sequence_parallel"),
        ),
        c("plan-zero-stage-5", (*est, "plan.zero_stage=5"), ("plan.zero_stage", "5")),
        c("plan-recompute-half", (*est, "plan.recompute=half"), ("plan.recompute", "half")),
        c("plan-compile-maybe", (*est, "plan.compile=maybe"), ("plan.compile", "maybe", "true or false")),
        c("plan-offload-gpu", (*est, "plan.offload=gpu"), ("plan.offload", "gpu", "none, optimizer, params")),
        c(
            "plan-offload-params-zero2",
            ("estimate", "--gpus", "2", "plan.zero_stage=2", "plan.offload=params"),
            ("offload=params", "requires zero_stage=3", "zero_stage=2"),
        ),
        c(
            "plan-dp_shard-indivisible",
            (*est, "--gpus", "8", "plan.zero_stage=3", "plan.dp_shard=3"),
            ("plan.dp_shard", "3", "divide"),
        ),
        c(
            "plan-dp_shard-zero1",
            (*est, "--gpus", "8", "plan.zero_stage=1", "plan.dp_shard=2"),
            ("plan.dp_shard", "2", "zero_stage"),
        ),
        c("plan-dp_shard-negative", (*est, "plan.dp_shard=-1"), ("plan.dp_shard", "-1", ">= 0")),
        c("space-dp_shard-negative", (*plan8, "space.dp_shard=[-2]"), ("space.dp_shard", "-2", ">= 0")),
        c("plan-fp8-foo", (*est, "plan.fp8=foo"), ("plan.fp8", "foo", "tensorwise")),
        c("plan-ep-zero", (*est, "plan.ep=0"), ("plan.ep", "0", ">= 1")),
        c("plan-moe-dispatcher-word", (*est, "plan.moe_dispatcher=foo"), ("plan.moe_dispatcher", "foo", "one of")),
        c(
            "plan-moe-dispatcher-bench-model",
            ("estimate", "--gpus", "2", "model=tiny-moe", "plan.ep=2", "plan.moe_dispatcher=deepep"),
            ("moe_dispatcher=deepep", "bench_model", "all-to-all only"),
        ),
        c(
            "plan-moe-dispatcher-needs-ep",
            ("estimate", "--gpus", "2", "model=tiny-moe", "plan.moe_dispatcher=allgather"),
            ("moe_dispatcher=allgather", "ep > 1", "ep=1"),
        ),
        c(
            "plan-ep_overlap-needs-ep",
            ("estimate", "--gpus", "2", "model=tiny-moe", "plan.ep_overlap=true"),
            ("plan.ep_overlap=true", "plan.ep > 1", "ep=1"),
        ),
        c(
            "plan-ep_overlap-bench-model",
            ("estimate", "--gpus", "2", "model=tiny-moe", "plan.ep=2", "plan.ep_overlap=true"),
            ("plan.ep_overlap=true", "train.framework=megatron", "bench_model"),
        ),
        c(
            "plan-tp_pp_dp_mapping-bench-model",
            (*est, "plan.pp=2", "plan.grad_accum_steps=16", "plan.tp_pp_dp_mapping=true"),
            ("plan.tp_pp_dp_mapping=true", "train.framework=megatron", "bench_model"),
        ),
        c(
            "plan-mla_recompute-no-mla",
            (*est, "plan.recompute=selective", "plan.mla_recompute=true"),
            ("plan.mla_recompute=true", "model.attention=mla", "gqa"),
        ),
        c(
            "plan-norm_recompute-dense",
            (*est, "train.framework=megatron", "plan.recompute=selective", "plan.norm_recompute=true"),
            ("plan.norm_recompute=true", "recompute nothing", "TELayerNormColumnParallelLinear"),
        ),
        c(
            "plan-mlp_recompute-all-moe",
            (
                "estimate",
                "--gpus",
                "8",
                "model=qwen3-30b-a3b",
                "train.framework=megatron",
                "plan.ep=8",
                "plan.recompute=selective",
                "plan.mlp_recompute=true",
            ),
            ("plan.mlp_recompute=true", "MoE layer", "plan.moe_recompute"),
        ),
        c("plan-etp-negative", (*est, "plan.etp=-2"), ("plan.etp", "-2", ">= 1")),
        c("plan-fp8-a100", (*est, "cluster=a100-80gb", "plan.fp8=tensorwise"), ("fp8=tensorwise", "a100-80gb")),
        c(
            "plan-mxfp8-hopper",
            (*est, "cluster=h100-sxm-80gb", "plan.fp8=mxfp8"),
            ("fp8=mxfp8", "h100-sxm-80gb", "peak_flops_mxfp8=null"),
        ),
        c(
            "cluster-nvlink-domain-not-whole-nodes",
            (*est, "cluster=gb200-nvl72", "cluster.nvlink_domain_size=6"),
            ("cluster.nvlink_domain_size=6", "multiple of cluster.gpus_per_node=4"),
        ),
        c("plan-sp-without-tp", (*est, "plan.sequence_parallel=true"), ("sequence_parallel", "tp")),
        c("plan-tp_overlap-without-tp", (*est, "plan.tp_overlap=true"), ("plan.tp_overlap=true", "plan.tp > 1")),
        c(
            "plan-tp_overlap-without-sp",
            (*est, "--gpus", "2", "plan.tp=2", "plan.tp_overlap=true"),
            ("plan.tp_overlap=true", "plan.sequence_parallel=true"),
        ),
        c(
            "plan-tp_overlap-without-compile",
            (*est, "--gpus", "2", "plan.tp=2", "plan.sequence_parallel=true", "plan.tp_overlap=true"),
            ("plan.tp_overlap=true", "plan.compile=true", "micro-pipeline"),
        ),
        c("plan-tp_overlap-not-bool", (*est, "plan.tp_overlap=maybe"), ("plan.tp_overlap", "maybe", "true or false")),
        c("plan-pp-exceeds-layers", (*est, "plan.pp=16"), ("pp=16", "8")),
        c(
            "plan-pp_split-without-pp",
            (*est, "plan.pp_split_embedding=true"),
            ("plan.pp_split_embedding=true", "plan.pp > 1"),
        ),
        c(
            "plan-pp_split-not-megatron",
            (*est, "--gpus", "2", "plan.pp=2", "plan.pp_split_embedding=true", "plan.pp_split_loss=true"),
            ("pp_split_loss=true", "train.framework=megatron", "framework=bench_model"),
        ),
        c("plan-vpp-without-pp", (*est, "plan.vpp=2"), ("vpp", "2")),
        c(
            "plan-moe_recompute-dense",
            (*est, "plan.recompute=selective", "plan.moe_recompute=moe"),
            ("plan.moe_recompute=moe", "MoE model", "dense"),
        ),
        c(
            "plan-moe_recompute-not-selective",
            (*est, "model=tiny-moe", "plan.moe_recompute=moe_act"),
            ("plan.moe_recompute=moe_act", "plan.recompute=selective"),
        ),
        c(
            "plan-moe_recompute-not-megatron",
            (*est, "model=tiny-moe", "plan.recompute=selective", "plan.moe_recompute=moe"),
            ("plan.moe_recompute=moe", "train.framework=megatron", "framework=bench_model"),
        ),
        c(
            "plan-act_offload-all-layers",
            (*est, "plan.act_offload_layers=8"),
            ("plan.act_offload_layers=8", "less than num_layers=8"),
        ),
        c(
            "plan-act_offload-with-pp",
            (*est, "--gpus", "2", "plan.pp=2", "plan.act_offload_layers=2"),
            ("plan.act_offload_layers=2", "plan.pp=1"),
        ),
        c(
            "plan-act_offload-with-recompute",
            (*est, "plan.recompute=full", "plan.act_offload_layers=2"),
            ("plan.act_offload_layers=2", "plan.recompute=none"),
        ),
        c(
            "plan-act_offload-not-megatron",
            (*est, "plan.act_offload_layers=2"),
            ("plan.act_offload_layers=2", "train.framework=megatron", "framework=bench_model"),
        ),
        c(
            "plan-recompute_layers-not-full",
            (*est, "plan.recompute=selective", "plan.recompute_layers=2"),
            ("plan.recompute_layers=2", "plan.recompute=full"),
        ),
        c(
            "plan-recompute_layers-exceeds-chunk",
            (*est, "plan.recompute=full", "plan.recompute_layers=9"),
            ("plan.recompute_layers=9", "at most 8"),
        ),
        c("plan-moe_recompute-unknown", (*est, "plan.moe_recompute=all"), ("plan.moe_recompute", "all", "moe_act")),
        c("plan-mbs-exceeds-batch", (*est, "plan.micro_batch_size=32"), ("micro_batch_size", "32")),
        c("plan-dp-batch-indivisible", (*est, "plan.dp=3"), ("global_batch_size", "3")),
        c("bench-tp3-heads", ("bench", "--nproc", "3", "plan.tp=3"), ("tp=3", "num_heads=8")),
    ]
    return cases


def _file_cases(p: dict[str, Path], spaces: str) -> list[BadInput]:
    c = BadInput
    bench = ("bench", "--nproc", "2", "--config")  # --nproc is required even with a trial file (reported)
    cases = [
        c("trialfile-python-tag", (*bench, str(p["tf_pytag"])), ("tf_pytag.yaml", "not valid YAML"), subprocess=True),
        c("trialfile-empty", (*bench, str(p["tf_empty"])), ("tf_empty.yaml",)),
        c("trialfile-list", (*bench, str(p["tf_list"])), ("tf_list.yaml",)),
        c("trialfile-syntax", (*bench, str(p["tf_syntax"])), ("tf_syntax.yaml", "YAML")),
        c("trialfile-foreign-yaml", (*bench, str(p["tf_other_yaml"])), ("tf_other_yaml.yaml", "autotune_trialfile")),
        c("trialfile-binary", (*bench, str(p["tf_binary"])), ("tf_binary.yaml",)),
        c("trialfile-directory", (*bench, str(p["a_dir"])), ("a_dir",)),
        c("trialfile-missing", (*bench, "inputs/nope.yaml"), ("nope.yaml", "no such")),
        c(
            "trialfile-unreadable",
            (*bench, str(p["tf_unreadable"])),
            ("tf_unreadable.yaml", "permission"),
            subprocess=True,
            unprivileged=True,
        ),
        c("trialfile-tp-word", (*bench, str(p["tf_tp_word"])), ("plan.tp", "two")),
        c("trialfile-unknown-field", (*bench, str(p["tf_unknown_field"])), ("plan.colour",)),
        c("trialfile-no-model", (*bench, str(p["tf_no_model"])), ("model",)),
        c("trialfile-zero-layers", (*bench, str(p["tf_zero_layers"])), ("model.num_layers", "0")),
        c("trialfile-tp3-heads", ("bench", "--nproc", "3", "--config", str(p["tf_tp3"])), ("tp=3", "num_heads=8")),
        c("trialfile-nproc-mismatch", (*bench, str(p["tf_tp3"])), ("--nproc=2", "tp(3)", "3")),
    ]
    env = {"AUTOTUNE_SEARCH_SPACES": spaces}
    plan8 = ("plan", "--gpus", "8")
    cases += [
        c(
            "cluster-neg-memory",
            (*plan8, "cluster=neg-memory"),
            ("cluster.device_memory_bytes", "-1"),
            env=env,
            subprocess=True,
        ),
        c("cluster-str-flops", (*plan8, "cluster=str-flops"), ("cluster.peak_flops_bf16", "fast"), env=env),
        c("cluster-typo-key", (*plan8, "cluster=typo-key"), ("gpus_per_nod",), env=env),
        c("cluster-python-tag", (*plan8, "cluster=py-tag"), ("py-tag",), env=env),
        c("cluster-empty", (*plan8, "cluster=empty"), ("cluster",), env=env),
        c("cluster-efficiency", (*plan8, "cluster=efficiency"), ("cluster.matmul_efficiency", "1.7"), env=env),
        c("cluster-no-hbm", (*plan8, "cluster=no-hbm"), ("cluster.hbm_bw_bytes_per_s", "not set"), env=env),
    ]
    hf = ("plan", "--gpus", "8", "model=hf")
    hf_cases = [
        c("hf-bad-json", (*hf, f"model.config_path={p['hf_bad_json']}"), ("hf_bad_json.json", "JSON")),
        c("hf-empty", (*hf, f"model.config_path={p['hf_empty']}"), ("hf_empty.json",)),
        c("hf-list", (*hf, f"model.config_path={p['hf_list']}"), ("hf_list.json",)),
        c(
            "hf-unknown-arch",
            (*hf, f"model.config_path={p['hf_arch']}"),
            ("WhisperForConditionalGeneration",),
            subprocess=True,
        ),
        c("hf-no-hidden", (*hf, f"model.config_path={p['hf_no_hidden']}"), ("hidden_size",)),
        c("hf-neg-layers", (*hf, f"model.config_path={p['hf_neg_layers']}"), ("num_hidden_layers", "-2")),
        c("hf-str-heads", (*hf, f"model.config_path={p['hf_str_heads']}"), ("num_attention_heads", "8")),
        c("hf-heads-7", (*hf, f"model.config_path={p['hf_heads_7']}"), ("7", "128")),
        c("hf-directory", (*hf, f"model.config_path={p['a_dir']}"), ("a_dir",)),
        c("hf-missing", (*hf, "model.config_path=inputs/nope.json"), ("nope.json", "no such")),
        c(
            "hf-unreadable",
            (*hf, f"model.config_path={p['hf_unreadable']}"),
            ("hf_unreadable.json", "permission"),
            subprocess=True,
            unprivileged=True,
        ),
    ]
    return cases + [dataclasses.replace(h, needs="search_spaces/model/hf.yaml") for h in hf_cases]


def _sweep_folder_cases(p: dict[str, Path]) -> list[BadInput]:
    c = BadInput
    sim = ("sweep", "--gpus", "4", "--backend", "simulate")
    return [
        c(
            "sweep-existing-bad-override",
            (*sim, "--sweep-id", "existing", "model=llama-9"),
            ("model", "llama-9"),
            subprocess=True,
        ),
        c("sweep-resume-bad-override", ("sweep", "--resume", "results/existing", "plan.tp=two"), ("plan.tp", "two")),
        c("sweep-resume-missing", ("sweep", "--resume", "results/nope"), ("results/nope",)),
        c("report-missing", ("report", "results/nope"), ("results/nope",)),
        c("report-file", ("report", str(p["a_file"])), ("a_file",)),
        c("report-top-zero", ("report", "results/existing", "--top", "0"), ("--top", "0")),
        c("export-trial-unknown", ("export", "results/existing", "--trial", "t9999"), ("t9999",), subprocess=True),
        c(
            "export-format-unknown",
            ("export", "results/existing", "--best", "--format", "caffe"),
            ("--format", "caffe"),
        ),
        c("export-no-ok-trial", ("export", "results/empty", "--best"), ("results/empty",)),
        c(
            "export-out-under-file",
            ("export", "results/existing", "--best", "-o", "inputs/a_file/best.yaml"),
            ("a_file", "must be a folder"),
        ),
        c("report-top-negative", ("report", "results/existing", "--top", "-3"), ("--top", "-3")),
        c(
            "sweep-resume-gpus-mismatch",
            ("sweep", "--resume", "results/existing", "--gpus", "16"),
            ("--gpus=16", "gpus=2"),
        ),
        c(
            "sweep-resume-and-id",
            ("sweep", "--resume", "results/existing", "--sweep-id", "x"),
            ("--resume", "--sweep-id"),
        ),
        c(
            "sweep-resume-bad-storage",
            ("sweep", "--resume", "results/existing", "--strategy", "optuna", "--storage", "nosuch://x"),
            ("storage",),
        ),
        c(
            "sweep-budget-negative",
            ("sweep", "--gpus", "4", "--backend", "simulate", "--budget-gpu-hours", "-1"),
            ("--budget-gpu-hours", "-1"),
        ),
        c(
            "sweep-slurm-partition-hostile",
            ("sweep", "--gpus", "4", "--backend", "slurm", "sweep.slurm.partition='a b; rm -rf /'"),
            ("sweep.slurm.partition", "rm -rf"),
        ),
        c(
            "sweep-slurm-extra-newline",
            (
                "sweep",
                "--gpus",
                "4",
                "--backend",
                "slurm",
                "sweep.slurm.extra_sbatch=['--comment=x\\n#SBATCH --wrap=id']",
            ),
            ("sweep.slurm.extra_sbatch",),
        ),
        c("calibrate-missing", ("calibrate", "results/nope", "-o", "inputs/cal.yaml"), ("results/nope",)),
        c(
            "calibrate-output-not-yaml",
            ("calibrate", "results/existing", "-o", "inputs/cal.json"),
            ("-o", "cal.json", ".yaml"),
        ),
        c(
            "calibrate-too-few-rows",
            ("calibrate", "results/existing", "-o", "inputs/cal.yaml"),
            ("results/existing", "3"),
        ),
        c("probe-memory-gpus-zero", ("probe-memory", "--gpus", "0"), ("--gpus", "0")),
        c("probe-memory-tp3", ("probe-memory", "plan.tp=3"), ("tp=3", "num_heads=8")),
        c(
            "probe-memory-offload-on-cpu",
            ("probe-memory", "--gpus", "2", "plan.zero_stage=3", "plan.offload=params"),
            ("plan.offload=params", "CUDA"),
        ),
    ]
