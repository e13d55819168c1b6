"""`autotune estimate [overrides incl. plan.*] [--gpus N] [--json]`: memory breakdown and predicted speed of ONE layout,
like `accelerate estimate-memory` but for a parallel training step."""

from __future__ import annotations

import argparse

from autotune.cli.accuracy import accuracy_note
from autotune.cli.common import add_layout_command, print_json
from autotune.layouts.estimate import estimate


def add_parser(subparsers, name: str) -> argparse.ArgumentParser:
    return add_layout_command(
        subparsers,
        name,
        help="memory breakdown and predicted speed of one layout (plan.*)",
        description="Estimate one layout given by plan.* overrides, e.g. plan.tp=2 plan.pp=4 "
        "plan.zero_stage=1; dp defaults to --gpus / (tp*pp*cp).",
        json_help="print mem_*, pred_*, fits and reject_reason as JSON",
        run=run,
    )


def run(args) -> int:
    from autotune.cli.keys import load_config_for

    cfg = load_config_for("estimate", args.overrides)
    row = estimate(cfg, args.gpus)
    if args.json:
        print_json(row)
        return 0
    _print(row, cfg, args.overrides)
    return 0


_TERMS = [
    ("parameters (stored)", None),
    ("  of which compute-dtype copy", "mem_compute_copy_bytes"),
    ("gradients", "mem_grads_bytes"),
    ("optimizer states (+ master)", "mem_optimizer_bytes"),
    ("activations", "mem_activations_bytes"),
    ("loss phase (logits and the loss's buffers)", "mem_logits_bytes"),
    ("comm buffers", "mem_buffers_bytes"),
    ("allocated peak", "mem_allocated_bytes"),
    ("allocator peak (max_memory_reserved: what frameworks print)", "mem_allocator_peak_bytes"),
    ("  of which cached: optimizer-step temporaries", "mem_cached_step_bytes"),
    ("  of which cached: gradients made in backward", "mem_cached_grads_bytes"),
    ("  of which cached: fp32 logits block", "mem_cached_logits_bytes"),
    ("runtime overhead (CUDA context, NCCL)", "mem_overhead_bytes"),
    ("device total (decides fits)", "mem_device_total_bytes"),
    ("host memory (offloaded states, per GPU)", "mem_host_bytes"),
]


def _print(row: dict, cfg, overrides=()) -> None:
    from rich.console import Console
    from rich.table import Table

    from autotune.cli.plan import assumed_cluster
    from autotune.core.labels import layout_label

    console = Console() if Console().is_terminal else Console(width=120)
    t = cfg.train  # Megatron's MTP modules and layout are train.* settings, not in the layout label
    mtp = f" · {t.mtp_num_layers} MTP module(s), counted as a layer on their rank" if t.mtp_num_layers else ""
    table = Table(
        title=f"{cfg.model.name} · {layout_label(row)} · {row['num_gpus']} x {cfg.cluster.name} · "
        f"worst rank: pipeline rank {row['worst_pp_rank']} ({row['worst_pp_rank_layers']} of {cfg.model.num_layers} "
        f"layers){mtp}" + (f" · layout {t.pp_layout}" if t.pp_layout else ""),
        title_justify="left",
    )
    table.add_column("component")
    table.add_column("GiB", justify="right")
    table.add_column("MiB", justify="right")
    table.add_column("GB (1e9)", justify="right")
    terms = [(label, row["mem_params_bytes"] if key is None else row[key]) for label, key in _TERMS]
    terms.append(("model states (params w/o copy + grads + optimizer)", row["mem_model_states_bytes"]))
    for label, v in terms:
        table.add_row(label, f"{v / 2**30:.2f}", f"{v / 2**20:,.1f}", f"{v / 1e9:.2f}")
    console.print(table)
    usable = cfg.cluster.device_memory_bytes * (1 - cfg.space.memory_headroom)
    console.print(
        f"fits: {'yes' if row['fits'] else 'no'} ({row['mem_device_total_bytes'] / 2**30:.1f} GiB of "
        f"{usable / 2**30:.1f} GiB usable, margin {row['mem_margin_bytes'] / 2**30:.1f} GiB = "
        f"{row['mem_margin_sigma']:.1f} sigma of the reserved model's error)"
        + ("" if row["fits"] else f" · {row['reject_reason']}")
        + (
            f" · host {row['mem_host_bytes'] / 2**30:.1f} GiB of {cfg.cluster.host_memory_bytes_per_gpu / 2**30:.1f} "
            "GiB per GPU"
            if row["mem_host_bytes"] > 0 and cfg.cluster.host_memory_bytes_per_gpu
            else ""
        )
        + (f" · rejected: {row['reject_reason']}" if row["fits"] and row["reject_reason"] else ""),
        highlight=False,
    )
    if int(row.get("dp_shard", 0) or 0) > 0:  # HSDP: where the states live and what crosses the replicas
        p = cfg.plan(row["num_gpus"])
        console.print(
            f"HSDP: states sharded over dp_shard*cp = {p.dp_shard}*{p.cp} = {p.dp_shard * p.cp} ranks, "
            f"{p.dp // p.dp_shard} replicas; gradient all-reduce across them {row['pred_dp_replicate_comm_s']:.3f} s "
            "per step before overlap (in dp exposed)",
            highlight=False,
        )
    terms = step_terms(row)
    console.print(
        f"predicted: step {row['pred_step_s']:.3f} s = "
        + " + ".join(f"{label} {v:.3f}" for label, v in terms)
        + f" · {row['pred_tokens_per_s']:,.0f} tok/s · {row['pred_tokens_per_s_per_gpu']:,.0f} tok/s/GPU · "
        f"MFU {100 * row['pred_mfu']:.1f}%"
        + (
            f" · compile: elementwise {row['pred_memory_bound_s']:.3f} s of compute fused, "
            f"~{row['pred_compile_time_s']:.0f} s compile per trial (warm-up, not timed)"
            if row.get("compile")
            else ""
        ),
        highlight=False,
    )
    console.print(accuracy_note(cfg.cluster.name, cfg.model.is_moe), highlight=False)
    if t.framework == "megatron" and row.get("fp8", "none") != "none":
        console.print(megatron_fp8_note(str(row["fp8"]), t.fp8_delayed_scaling), highlight=False)
    if t.framework == "torchtitan":
        console.print(torchtitan_loss_note(t.loss_chunks, float(row["mem_logits_bytes"])), highlight=False)
    if assumed_cluster(overrides, cfg):
        console.print(
            f"cluster: {cfg.cluster.name} (the default preset, assumed because no cluster= was given)", highlight=False
        )


def megatron_fp8_note(fp8: str, delayed: bool) -> str:
    """The Transformer Engine recipe a megatron-profile estimate priced and what it keeps (MegatronProfile's
    [TE-SOI]: Megatron-Core >= 0.14 makes the attention projection and the shared expert's fc1 save their bf16 input
    under every recipe but delayed scaling), so a user on delayed scaling sees the setting that prices it."""
    if fp8 == "tensorwise" and delayed:
        return (
            "fp8: Transformer Engine delayed scaling (--fp8-recipe delayed, train.fp8_delayed_scaling): the attention "
            "projection and a shared expert's fc1 keep FP8 copies of their inputs"
        )
    recipe = {"tensorwise": "--fp8-recipe tensorwise (current scaling)", "nvfp4": "--fp4-recipe nvfp4"}.get(
        fp8, f"--fp8-recipe {fp8}"
    )
    hint = "; train.fp8_delayed_scaling=true prices --fp8-recipe delayed" if fp8 == "tensorwise" else ""
    return (
        f"fp8: Transformer Engine {recipe}: the attention projection and a shared expert's fc1 save their bf16 "
        f"input (Megatron-Core >= 0.14){hint}"
    )


def torchtitan_loss_note(chunks: int, loss_bytes: float) -> str:
    """Which torchtitan loss the estimate priced ([CHUNK] in autotune/predict/frameworks/torchtitan.py): 0.2.2's one
    pass over the micro-batch's logits, or torchtitan main's ChunkedLossWrapper in train.loss_chunks slices."""
    gib = f"{loss_bytes / 2**30:.2f} GiB in the loss phase"
    if chunks:
        return f"loss: ChunkedLossWrapper in {chunks} slices (torchtitan main, train.loss_chunks): {gib}"
    return (
        f"loss: one pass over the micro-batch's logits (torchtitan 0.2.2): {gib}; torchtitan main's model configs "
        "chunk it (ChunkedLossWrapper): train.loss_chunks=8 prices that"
    )


# The additive terms of the predicted step (autotune/predict/perf.py `perf_arrays`: step = compute + tp + cp + ep + pp
# + exposed dp + bubble + optimizer + host), in the order printed. attention_s and memory_bound_s are parts of compute and
# dp_replicate_comm_s is inside dp exposed: they are not terms of the sum.
STEP_TERMS = (
    ("compute", "pred_compute_s"),
    ("tp", "pred_tp_comm_s"),
    ("cp", "pred_cp_comm_s"),
    ("ep", "pred_ep_comm_s"),
    ("pp", "pred_pp_comm_s"),
    ("dp exposed", "pred_dp_comm_s"),
    ("bubble", "pred_bubble_s"),
    ("optimizer", "pred_optimizer_s"),
    ("host", "pred_host_s"),  # what the host adds beyond the device time (autotune/predict/host.py)
)


def step_terms(row: dict) -> list[tuple[str, float]]:
    """(label, seconds) of every term of the step; a remainder the terms do not explain is shown, never dropped."""
    terms = [(label, float(row[key] or 0.0)) for label, key in STEP_TERMS]
    rest = float(row["pred_step_s"]) - sum(v for _, v in terms)
    if abs(rest) > 1e-6 * max(float(row["pred_step_s"]), 1e-9):
        terms.append(("unattributed", rest))
    return terms
