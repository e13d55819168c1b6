"""MLPerf Training Llama 3.1 405B submissions (NVIDIA's NeMo / Megatron-Core implementations, v5.0 and v5.1) as
published layouts that ran (benchmarks/published_fit.py source `mlperf`; no memory figure is published): each row of
benchmarks/data/measured/mlperf_llama31_405b_configs.csv is one submission's config_*.sh, read with the config_common
files its folder sources (cited per row): every 405B result of v5.0 (14) and v5.1 (6; its two Nebius results are the
v5.0 logs byte for byte, one row each), each the config its folder's README-<system>.md names and its
results/<system>/llama31_405b logs ran (gradient_accumulation_steps and global_batch_size as the layout gives them);
the other config files of a folder (other systems' layouts that no result of the round ran) are not rows. FP8_PARAMS
(v5.0 H100 / H200) and FP8_PARAM_GATHER both map to train.fp8_param_gather. The submissions' implementation maps the
environment variables onto Megatron-Core through conf/custom.yaml (prishajain1/training_results_v5.0 @ 0fdc28f0,
NVIDIA tyche_ngpu256_ngc25.04_nemo): TENSOR/PIPELINE_MODEL_PARALLEL, INTERLEAVED_PIPELINE (virtual stages), CONTEXT_PARALLEL, MICRO_BATCH_SIZE, global batch =
MINIBS x (GPUs / (tp pp cp)), i.e. MINIBS micro-batches of mbs 1 per data-parallel rank; ASYM_PP_EMBED / ASYM_PP_LOSS ->
account_for_embedding / loss_in_pipeline_split; FP8 with fp8_recipe (delayed by default, priced as tensorwise: the same
FP8 operand bytes), FP8_PARAM_GATHER; USE_DIST_OPTIMIZER (ZeRO-1); TP_COMM_OVERLAP (userbuffers); TP_PP_DP_MAPPING
(custom.yaml use_tp_pp_dp_mapping -> plan.tp_pp_dp_mapping: every GB200 / GB300 result but v5.0 tyche_ngpu256, and
University of Florida's B200 (../b200_nemo/config_common.sh), set it); FULL_CUDA_GRAPH;
DEFER_EMBEDDING_WGRAD_COMPUTE with WGRAD_DEFERRAL_LIMIT (train.embedding_wgrad_deferral); cross_entropy_loss_fusion
(default true: Megatron's fused loss, "native"); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; sequence 8192
(encoder_seq_length).

Speed: `train_step_time_s` is the median over the submission's result files (results/<system>/llama31_405b/
result_*.txt, 3 each) of each file's median `train_step_time` (the mlperf_common callback's tracked_stats, one per
training step; evaluation is outside it), so tokens/s per GPU = global batch x 8192 / step / GPUs
(`measured_tokens_per_s_per_gpu`). Nothing is fitted on it: benchmarks/mlperf_speed.py scores the speed model there."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from autotune.core.types import ParallelPlan, TrainSpec
from autotune.fitting.nemo_runs import NEMO_GPU
from autotune.fitting.run_types import DATA, preset_model

MLPERF_CSV = "mlperf_llama31_405b_configs.csv"
SEQ_LEN = 8192  # conf/custom.yaml model.encoder_seq_length
GPU = {**NEMO_GPU, "H200": "h200-141gb"}  # the Nebius submissions ran DGX H200 nodes


def mlperf_layout(r) -> tuple[str, TrainSpec, ParallelPlan]:
    """One submission as (cluster preset, train, plan)."""
    n, tp, pp, vp, cp, mbs = int(r.n_gpus), int(r.tp), int(r.pp), int(r.vp), int(r.cp), int(r.mbs)
    dp = n // (tp * pp * cp)
    if dp * tp * pp * cp != n:
        raise ValueError(f"{r.row_id}: n_gpus={n} does not split as tp={tp} pp={pp} cp={cp}")
    plan = ParallelPlan(
        dp=dp,
        tp=tp,
        pp=pp,
        cp=cp,
        vpp=vp,
        zero_stage=1,  # USE_DIST_OPTIMIZER=True
        micro_batch_size=mbs,
        grad_accum_steps=int(r.minibs) // mbs,
        sequence_parallel=tp > 1,
        tp_overlap=bool(r.tp_overlap) and tp > 1,
        pp_schedule="interleaved_1f1b" if vp > 1 else "1f1b",
        fp8=str(r.fp8),
        compile=True,  # fused elementwise kernels and casts, as autotune/fitting/nemo_runs.py maps Megatron-Core
        pp_split_embedding=bool(r.pp_split) and pp > 1,
        pp_split_loss=bool(r.pp_split) and pp > 1,
        tp_pp_dp_mapping=bool(r.tp_pp_dp_mapping),
    )
    train = TrainSpec(
        seq_len=SEQ_LEN,
        global_batch_size=dp * mbs * plan.grad_accum_steps,
        param_dtype="bf16",
        grad_dtype="bf16",
        master_dtype="fp32",
        hidden_dropout=0.0,
        fp8_param_gather=bool(r.fp8_param_gather),
        # v5.0: conf/custom.yaml's fp8_recipe default, delayed, on NeMo 25.0x containers (Megatron-Core before
        # core_v0.14.0); v5.1's FP8 configs set tensorwise (current scaling)
        fp8_delayed_scaling=str(r.fp8) == "tensorwise" and str(r.row_id).startswith("v50-"),
        cross_entropy_fusion="native",
        cuda_graphs=str(r.cuda_graphs),
        embedding_wgrad_deferral=int(r.wgrad_deferral),
        framework="megatron",
    )
    return GPU[str(r.gpu_type)], train, plan


def load_mlperf_rows(folder: Path = DATA) -> list[tuple[str, object, str, TrainSpec, ParallelPlan, bool]]:
    """(row id, model, cluster, train, plan, expandable_segments) for every submission of the CSV."""
    model = preset_model("llama-3.1-405b")
    out = []
    for r in pd.read_csv(folder / MLPERF_CSV).itertuples():
        cluster, train, plan = mlperf_layout(r)
        out.append((str(r.row_id), model, cluster, train, plan, bool(r.expandable_segments)))
    return out


def measured_tokens_per_s_per_gpu(folder: Path = DATA) -> dict[str, float]:
    """Row id -> the submission's training tokens/s per GPU from its logged median step time (module docstring)."""
    out = {}
    for r in pd.read_csv(folder / MLPERF_CSV).itertuples():
        _, train, plan = mlperf_layout(r)
        tokens = train.global_batch_size * train.seq_len
        out[str(r.row_id)] = tokens / float(r.train_step_time_s) / plan.world_size
    return out
