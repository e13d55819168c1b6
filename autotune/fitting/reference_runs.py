"""Public measured training runs as (ModelSpec, TrainSpec, cluster preset, ParallelPlan, measured tok/s/GPU, source).

Data: benchmarks/data/measured/ (copies of the public tables, see benchmarks/data/README.md). Every row is either
mapped or listed in `skipped` with its reason (unknown model, fine-tuning, missing columns...).

Model shapes (cited per family; where a source omits a value the assumption is stated next to it):
- MPT (mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml): d_model, n_heads, n_layers below,
  expansion_ratio 4, vocab_size 50368, tied embedding/output, LayerNorm + GeLU MLP (our `block="gpt"`; MPT's
  no_bias drops the biases, a <0.1% parameter difference).
- GPT (Narayanan et al. 2021 "Efficient Large-Scale Language Model Training on GPU Clusters" Table 1 and Table 2;
  Brown et al. 2020 "GPT-3" Table 2.1 for the 175B shape): 4h MLP, vocab 51200, seq 2048, tied embeddings.
  The Megatron-LM README 2024 H100 table runs --tp-comm-overlap (TP collectives hidden behind GEMMs by Transformer
  Engine userbuffers): mapped with plan.tp_overlap (megatron_2024_layout).
- Llama (meta-llama model cards / config.json): search_spaces/model/*.yaml.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pandas as pd

from autotune.core.model import ModelSpec
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.fitting.nemo_runs import load_nemo_rows
from autotune.fitting.run_types import DATA, ReferenceRun, SkippedRow
from autotune.fitting.run_types import preset_model as _preset_model

# llm-foundry pretrain yamls: (n_layers, d_model, n_heads)
MPT_SHAPES = {
    "MPT-125m": (12, 768, 12),
    "MPT-350m": (24, 1024, 16),
    "MPT-760m": (24, 1536, 12),
    "MPT-1b": (24, 2048, 16),
    "MPT-3b": (32, 2560, 20),
    "MPT-7b": (32, 4096, 32),
    "MPT-13b": (40, 5120, 40),
    "MPT-30b": (48, 7168, 56),
    "MPT-70b": (80, 8192, 64),
}
MPT_VOCAB = 50368
# Narayanan et al. 2021 Table 1 (params -> layers, hidden, heads, tp, pp); the README copy omits heads/TP/PP for some
NARAYANAN_T1 = {
    "1.7B": (24, 2304, 24, 1, 1),
    "3.6B": (30, 3072, 32, 2, 1),
    "7.5B": (36, 4096, 32, 4, 1),
    "18B": (40, 6144, 48, 8, 1),
    "39B": (48, 8192, 64, 8, 2),
    "76B": (60, 10240, 80, 8, 4),
    "145B": (80, 12288, 96, 8, 8),
    "310B": (96, 16384, 128, 8, 16),
    "530B": (105, 20480, 128, 8, 35),
    "1T": (128, 25600, 160, 8, 64),
}
# Table 2 prints only the parameter count: GPT-3 175B (Brown et al. 2020 Table 2.1: 96 layers, 12288, 96 heads) and
# MT-NLG 530B (Table 1 row above)
NARAYANAN_T2 = {"GPT 174.6B": (96, 12288, 96), "GPT 529.6B": (105, 20480, 128)}
GPT_VOCAB_2021 = 51200
GPU_PRESET = {
    "h100_80gb": "h100-sxm-80gb",
    "a100_80gb": "a100-80gb",
    "a100_40gb": "a100-40gb",
    "H100": "h100-sxm-80gb",
    "A100": "a100-80gb",
    "A100 (Selene)": "a100-80gb",
}  # Selene: DGX A100 80GB nodes (Narayanan Sec 5)


def _gpt(name: str, layers: int, hidden: int, heads: int, vocab: int) -> ModelSpec:
    return ModelSpec(
        name=name,
        num_layers=layers,
        hidden_size=hidden,
        ffn_hidden_size=4 * hidden,
        num_heads=heads,
        num_kv_heads=heads,
        vocab_size=vocab,
        tie_embeddings=True,
        block="gpt",
    )


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


# llm-foundry's attention kernel per benchmark table: every table but the large-scale one ran submit_benchmarks.py's
# default `--attn_impl triton` (scripts/train/benchmarking/submit_benchmarks.py @ b2a43a147, the commit that published
# the H100 / A100 tables; sweep.sh there passes no --attn_impl, and the pretrain yamls at v0.3.0, e.g.
# scripts/train/yamls/pretrain/mpt-1b.yaml, set attn_impl: triton themselves; the default became 'flash' only at 7f0fdae66, March
# 2024). The "H100 80GB BF16 (Large Scale, >= 128 GPUs)" table (5e85bd62d) ran sweep.py there, which sets it per model:
# flash (flash-attn 2.4.2, the gpu-flash2 extra) for 1b / 3b / 7b / 70b, triton for 13b / 30b.
MPT_LARGE_SCALE_FLASH = ("MPT-1b", "MPT-3b", "MPT-7b", "MPT-70b")


def mpt_attention_kernel(table: str, model: str) -> str:
    """The attention kernel (TrainSpec.attention_kernel) one llm-foundry benchmark row ran (see MPT_LARGE_SCALE_FLASH)."""
    return "fa2" if "Large Scale" in table and model in MPT_LARGE_SCALE_FLASH else "triton"


def llmfoundry_layout(r: Any, fp8: str = "none") -> tuple[ModelSpec, TrainSpec, ParallelPlan]:
    """One llm-foundry benchmark row as (model, train, plan): FSDP over all GPUs (FULL_SHARD = ZeRO-3, else 2), its
    micro-batch and accumulation, full recompute when activation_checkpointing, bf16 grads only under PURE."""
    layers, hidden, heads = MPT_SHAPES[r.model]
    n, mbs, gas = int(r.n_gpus), int(r.micro_batch), int(r.grad_accum)
    plan = ParallelPlan(
        dp=n,
        zero_stage=3 if r.fsdp_sharding_strategy == "FULL_SHARD" else 2,
        micro_batch_size=mbs,
        grad_accum_steps=gas,
        recompute="full" if bool(r.activation_checkpointing) else "none",
        fp8=fp8,
    )
    train = TrainSpec(
        seq_len=int(r.seq_len),
        global_batch_size=n * mbs * gas,
        grad_dtype="bf16" if r.mp_mode == "PURE" else "fp32",
        attention_kernel=mpt_attention_kernel(str(r.table), str(r.model)),  # attn_impl triton or flash (above)
        # amp_fp8 is Transformer Engine's fp8_autocast with DelayedScaling (mosaicml/composer composer/core/precision.py
        # @ 02c872e, Precision.AMP_FP8): TE's fused cast-transposes, not torchao's per-linear casts
        fp8_casts="te" if fp8 != "none" else None,
        # ComposerMPTCausalLM's loss_fn defaults to 'fused_crossentropy', flash-attn's CrossEntropyLoss (mosaicml/
        # llm-foundry llmfoundry/models/mpt/modeling_mpt.py): one read of the logits forward, one read and the
        # gradient's write backward (perf_terms.LOSS_KERNELS "fused")
        loss_kernel="fused",
    )
    return _gpt(r.model, layers, hidden, heads, MPT_VOCAB), train, plan


def load_llmfoundry(folder: Path = DATA) -> tuple[list[ReferenceRun], list[SkippedRow]]:
    """llm-foundry MPT benchmark tables: Composer FSDP, DP = n_gpus, no TP/PP. FULL_SHARD = ZeRO-3, SHARD_GRAD_OP =
    ZeRO-2; activation checkpointing = full recompute; mp_mode PURE reduces grads in bf16, DEFAULT in fp32; amp_fp8 =
    FP8 linears (tensorwise). train.framework stays bench_model (FSDP with prefetch, grads reduced behind backward, an
    unfused AdamW): llm-foundry's pretrain YAMLs (scripts/train/yamls/pretrain/mpt-*.yaml) set `decoupled_adamw`,
    composer's DecoupledAdamW, a per-tensor loop of mul_, add_, addcmul_, sqrt, div, add_, addcdiv_
    (mosaicml/composer composer/optim/decoupled_weight_decay.py), unfused like torch.optim.AdamW's foreach path that
    bench_model prices (perf_terms.ADAM_TENSORS_UNFUSED)."""
    df = pd.read_csv(folder / "llmfoundry_mpt_benchmarks.csv")
    runs, skipped = [], []
    for i, r in df.iterrows():
        if r.model not in MPT_SHAPES or r.gpu_type not in GPU_PRESET:
            skipped.append(SkippedRow("llmfoundry", i, f"model={r.model} gpu_type={r.gpu_type}: no shape or preset"))
            continue
        # amp_fp8: Transformer Engine FP8 linears with delayed per-tensor scaling: the same FP8 GEMM rate as torchao's
        # tensorwise recipe, counted as tensorwise (as Megatron's FP8 rows in nemo_runs.py), cast as TE casts
        # (train.fp8_casts="te", llmfoundry_layout)
        model, train, plan = llmfoundry_layout(r, "tensorwise" if "fp8" in str(r.precision).lower() else "none")
        runs.append(
            ReferenceRun(
                "llmfoundry",
                i,
                model,
                train,
                GPU_PRESET[r.gpu_type],
                plan,
                float(r.throughput_tok_per_s_per_gpu),
            )
        )
    return runs, skipped


def _megatron_flops_per_token(model: ModelSpec, seq: int, recompute: bool) -> float:
    """Megatron's own accounting: Narayanan et al. 2021 Eq. 3, F = 96 B s l h^2 (1 + s/6h + V/16lh) with activation
    recomputation (4 passes); without it (Megatron-LM 2024 `num_floating_point_operations`, 3 passes, non-causal
    attention) 72 B s l h^2 (1 + s/6h + V/12lh). Per token: divide by B s."""
    nl, h, v = model.num_layers, model.hidden_size, model.vocab_size
    if recompute:
        return 96.0 * nl * h * h * (1 + seq / (6 * h) + v / (16 * nl * h))
    return 72.0 * nl * h * h * (1 + seq / (6 * h) + v / (12 * nl * h))


def megatron_2024_layout(r: Any, tp_overlap: bool = True) -> tuple[ModelSpec, TrainSpec, ParallelPlan]:
    """A Megatron-LM README 2024 H100 row as (model, train, plan). Printed: layers, hidden, heads, TP, PP, GPUs, batch,
    seq 4096, vocab 131072, and the flags --overlap-grad-reduce --overlap-param-gather --tp-comm-overlap. Implied:
    --overlap-param-gather needs the distributed optimizer (zero_stage 1); --tp-comm-overlap needs sequence parallelism
    (validate_args), and at TP=1 validate_args switches SP off, so that row cannot have run it (tp_overlap off); bf16
    accumulates and all-reduces gradients in fp32 (validate_args, "bfloat16 requires gradient accumulation and
    all-reduce to be done in fp32"). Assumed where the source is silent: micro-batch 1, no recompute (the TFLOP/s use
    the 3-pass formula), non-interleaved 1F1B, tied embeddings (GPT default). `tp_overlap=False`: the same run with
    plain TP, for the before/after comparison."""
    layers, hidden, heads, tp, pp = (int(r[k]) for k in ("layers", "hidden", "heads", "tp", "pp"))
    n, gbs, seq = int(r.n_gpus), int(r.global_batch), int(r.seq_len)
    model = _gpt(str(r.model).replace(" ", "-").lower() + "-2024", layers, hidden, heads, int(r.vocab))
    dp = n // (tp * pp)
    plan = ParallelPlan(
        dp=dp,
        tp=tp,
        pp=pp,
        zero_stage=1,
        micro_batch_size=1,
        grad_accum_steps=gbs // dp,
        sequence_parallel=tp > 1,
        tp_overlap=tp_overlap and tp > 1,
    )
    train = TrainSpec(
        seq_len=seq,
        global_batch_size=gbs,
        param_dtype="bf16",
        grad_dtype="fp32",
        master_dtype="fp32",
        framework="megatron",  # Megatron-LM: fused Adam, bf16 weights; --overlap-grad-reduce --overlap-param-gather (the profile's overlaps)
    )
    return model, train, plan


def load_megatron(folder: Path = DATA) -> tuple[list[ReferenceRun], list[SkippedRow]]:
    """Megatron-LM: Narayanan 2021 Tables 1-2 (A100, TFLOP/s per GPU with recompute, Eq. 3). Assumptions where the
    source is silent: micro-batch 1 in Table 1 (it prints none), non-interleaved 1F1B, full recompute (the paper uses
    activation recomputation). The README's 2024 H100 rows: megatron_2024_layout (TP communication overlap)."""
    df = pd.read_csv(folder / "megatron_lm_narayanan2021.csv")
    runs, skipped = [], []
    for i, r in df.iterrows():
        table, name = str(r.table), str(r.model)
        if "strong scaling" in table:
            skipped.append(SkippedRow("megatron", i, "strong-scaling rows: TP/PP and TFLOP/s not stated"))
            continue
        if "Table 1" in table:
            layers, hidden, heads, tp, pp = NARAYANAN_T1[name]
            model, seq, mbs, rec, zero = _gpt(f"gpt-{name}", layers, hidden, heads, GPT_VOCAB_2021), 2048, 1, True, 0
        elif "Table 2" in table:
            layers, hidden, heads = NARAYANAN_T2[name]
            model, seq, rec = _gpt(name.replace(" ", "-").lower(), layers, hidden, heads, GPT_VOCAB_2021), 2048, True
            tp, pp = (1, 1) if r.zero_stage == 3 else (int(r.tp), int(r.pp))
            mbs, zero = int(r.micro_batch), 3 if r.zero_stage == 3 else 0
        else:  # 2024 H100 weak scaling: --tp-comm-overlap (plan.tp_overlap), see megatron_2024_layout
            model, train, plan = megatron_2024_layout(r)
            tok = float(r.tflops_per_gpu) * 1e12 / _megatron_flops_per_token(model, train.seq_len, False)
            runs.append(ReferenceRun("megatron", i, model, train, GPU_PRESET[str(r.gpu_type)], plan, tok))
            continue
        n, gbs = int(r.n_gpus), int(r.global_batch)
        dp = n // (tp * pp)
        if dp * tp * pp != n or gbs % (dp * mbs):
            skipped.append(SkippedRow("megatron", i, f"n_gpus={n} global_batch={gbs} do not split as tp={tp} pp={pp}"))
            continue
        plan = ParallelPlan(
            dp=dp,
            tp=tp,
            pp=pp,
            zero_stage=zero,
            micro_batch_size=mbs,
            grad_accum_steps=gbs // (dp * mbs),
            recompute="full" if rec else "none",
            sequence_parallel=False,
        )
        tok = float(r.tflops_per_gpu) * 1e12 / _megatron_flops_per_token(model, seq, rec)
        # Megatron/Narayanan keep bf16 params and grads with an fp32 master copy (Rajbhandari et al. 2020 accounting).
        # Table 2's ZeRO-3 rows ran DeepSpeed's ZeRO-3 inside Megatron's codebase (Narayanan et al. 2021 Sec 5.2:
        # "We integrated ZeRO into our codebase using the DeepSpeed Python library"): the deepspeed profile prices
        # their parameter gathers and gradient reduce-scatters (autotune/predict/frameworks/deepspeed.py [Z3C])
        train = TrainSpec(
            seq_len=seq,
            global_batch_size=gbs,
            param_dtype="bf16",
            grad_dtype="bf16",
            master_dtype="fp32",
            framework="deepspeed" if zero == 3 else "megatron",
        )
        runs.append(ReferenceRun("megatron", i, model, train, GPU_PRESET[str(r.gpu_type)], plan, tok))
    return runs, skipped


def load_nemo(folder: Path = DATA) -> tuple[list[ReferenceRun], list[SkippedRow]]:
    """NeMo / Megatron-Bridge summaries: autotune/fitting/nemo_runs.py (dense and MoE, H100 and Blackwell, BF16 / FP8 /
    MXFP8 / NVFP4; every other row listed with its reason)."""

    return load_nemo_rows(folder)


H200_LEASES = ("h200_bench_model_2026-11-25.csv", "h200_bench_model_2026-11-29.csv")  # oldest first
# the loss each lease's trainer ran (perf_terms.LOSS_KERNELS; the newest: bench_model's own, by pp / tp / compile):
# 2026-11-23 (46ae7e1) F.cross_entropy on the whole micro-batch's fp32 logits; 2026-11-25 (before 1fb4933) the
# chunks under checkpoint at every tp (measured README: "the chunked, checkpointed loss ... cost 11% speed")
H200_LEASE_LOSS = {"h200_bench_model_2026-11.csv": "unfused", "h200_bench_model_2026-11-25.csv": "checkpointed"}


def h200_layout_key(layout: str, compile_: bool) -> frozenset:
    """One H200 case's layout as a set of overrides, defaults filled in (recompute / fp8 none, learned routing) and
    the global batch dropped (both leases ran 2 micro-batches per step), so the same layout matches across leases whose
    scripts spelled it differently."""
    kv = dict(tok.split("=", 1) for tok in layout.split())
    kv.pop("plan.compile", None)
    kv.pop("train.global_batch_size", None)
    kv.setdefault("plan.recompute", "none")
    kv.setdefault("plan.fp8", "none")
    kv.setdefault("train.moe_routing", "learned")
    return frozenset({**kv, "compile": str(bool(compile_))}.items())


def h200_remeasured(folder: Path, file: str) -> set[frozenset]:
    """The layouts a later H200 lease than `file` measured again with the trainer of its day: the later row describes
    the trainer autotune ships, so the earlier one leaves the fit (listed as skipped, with the file that replaced it)."""
    later = H200_LEASES[H200_LEASES.index(file) + 1 :] if file in H200_LEASES else ()
    keys: set[frozenset] = set()
    for f in later:
        df = pd.read_csv(folder / f)
        keys |= {h200_layout_key(str(r.layout), bool(r.compile)) for r in df.itertuples() if r.status == "ok"}
    return keys


def load_h200_bench(
    folder: Path = DATA, file: str = "h200_bench_model_2026-11.csv", source: str = "h200_bench"
) -> tuple[list[ReferenceRun], list[SkippedRow]]:
    """autotune's own trainer (bench_model) on one H200: runs with a measured throughput. The `layout` column
    holds the CLI overrides of the run (plan.*, train.moe_routing, model.num_layers: a truncated model), the `compile`
    column plan.compile; HF reference runs, memory probes, OOMs and the older trainer's rows (kind "bench_model at
    commit ...", kept in the table to show the trainer's regression) are listed."""
    df = pd.read_csv(folder / file)
    again = h200_remeasured(folder, file)
    runs, skipped = [], []
    for i, r in df.iterrows():
        if not str(r.kind).startswith("bench_model trainer"):
            skipped.append(SkippedRow(source, i, f"kind={r.kind}: not the bench_model trainer at this head"))
            continue
        if str(r.status) != "ok" or _missing(r.tokens_per_s_per_gpu):
            skipped.append(SkippedRow(source, i, f"status={r.status}: no throughput"))
            continue
        if h200_layout_key(str(r.layout), bool(r.compile)) in again:
            skipped.append(SkippedRow(source, i, "measured again on a later H200 lease (the trainer since changed)"))
            continue
        if file != H200_LEASES[-1] and bool(r.compile) and "plan.recompute=selective" in str(r.layout):
            # before 1fb4933 compiled selective graph-broke at every RecomputeInBackward region (pure cost, issue 29):
            # no plan value prices that trainer; today's (one SwiGLU checkpoint) is the 2026-11-29 lease's
            skipped.append(SkippedRow(source, i, "compiled selective of the trainer before 1fb4933: not priced"))
            continue
        kv = dict(tok.split("=", 1) for tok in str(r.layout).split())
        model = _preset_model(kv.pop("model"))
        if "model.num_layers" in kv:  # the 2026-11-25 MoE rows: the preset cut to its first layers
            model = dataclasses.replace(model, num_layers=int(kv.pop("model.num_layers")))
        seq, gbs = int(kv.pop("train.seq_len")), int(kv.pop("train.global_batch_size"))
        train = TrainSpec(
            seq_len=seq,
            global_batch_size=gbs,
            moe_routing=kv.pop("train.moe_routing", "learned"),
            loss_kernel=H200_LEASE_LOSS.get(file),
        )
        plan_kw: dict[str, Any] = {k.removeprefix("plan."): v for k, v in kv.items()}
        mbs = int(plan_kw.pop("micro_batch_size"))
        plan_kw.pop("compile", None)  # the csv's compile column says the same
        plan = ParallelPlan(
            micro_batch_size=mbs,
            grad_accum_steps=gbs // mbs,
            recompute=plan_kw.pop("recompute", "none"),
            zero_stage=int(plan_kw.pop("zero_stage", 0)),
            fp8=plan_kw.pop("fp8", "none"),
            compile=bool(r.compile),  # torch.compile per block (the csv's compile column)
        )
        if plan_kw:
            skipped.append(SkippedRow(source, i, f"layout fields not mapped: {sorted(plan_kw)}"))
            continue
        runs.append(ReferenceRun(source, i, model, train, "h200-141gb", plan, float(r.tokens_per_s_per_gpu)))
    return runs, skipped


def load_h200_bench_1125(folder: Path = DATA) -> tuple[list[ReferenceRun], list[SkippedRow]]:
    """The second H200 lease (2026-11-25, torch 2.11.0+cu130): dense 1B/3B eager and compiled, FP8 tensorwise and
    rowwise, and MoE models cut to 2-4 layers (benchmarks/data/measured/README: the shared table's README)."""
    return load_h200_bench(folder, "h200_bench_model_2026-11-25.csv", "h200_bench_1125")


def load_h200_bench_1129(folder: Path = DATA) -> tuple[list[ReferenceRun], list[SkippedRow]]:
    """The third H200 lease (2026-11-29, torch 2.11.0+cu130, torchao 0.18.0, autotune 3fab1c6: the trainer with the
    fused linear cross-entropy, compiled selective recompute and index_select MoE permute): benchmarks/gpu_validation.py
    --all, 11 of its 12 cases. The 2026-11-25 rows of the same layouts leave the fit (h200_remeasured)."""
    return load_h200_bench(folder, "h200_bench_model_2026-11-29.csv", "h200_bench_1129")


def load_public_moe(folder: Path = DATA) -> tuple[list[ReferenceRun], list[SkippedRow]]:
    """Published MoE and Blackwell runs: autotune/fitting/public_moe_runs.py (imported here, not at module level:
    benchmarks/model_accuracy.py's BEFORE replay loads this file against an older package without that module)."""
    from autotune.fitting.public_moe_runs import load_public_moe as load

    return load(folder)


def load_torchtitan(folder: Path = DATA) -> tuple[list[ReferenceRun], list[SkippedRow]]:
    """torchtitan's published benchmark tables (Llama 3.1 8B-405B on 8-512 H100 96GB, 8B on 32-64 H200):
    autotune/fitting/torchtitan_runs.py (imported here for the same reason as load_public_moe)."""
    from autotune.fitting.torchtitan_runs import load_torchtitan as load

    return load(folder)


LOADERS = {
    "llmfoundry": load_llmfoundry,
    "nemo": load_nemo,
    "megatron": load_megatron,
    "h200_bench": load_h200_bench,
    "h200_bench_1125": load_h200_bench_1125,
    "h200_bench_1129": load_h200_bench_1129,
    "moe_public": load_public_moe,
    "torchtitan": load_torchtitan,
}


def load_reference_runs(folder: Path | str = DATA) -> tuple[list[ReferenceRun], list[SkippedRow]]:
    runs: list[ReferenceRun] = []
    skipped: list[SkippedRow] = []
    for load in LOADERS.values():
        r, s = load(Path(folder))
        runs += r
        skipped += s
    return runs, skipped
