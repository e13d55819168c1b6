"""`autotune bench --nproc N [overrides incl. plan.*] [--steps S] [--config FILE] [--json]`: run ONE layout of the
built-in benchmark trainer (bench_model) locally on N ranks (gloo CPU ranks, or this host's GPUs on NCCL) through
launchers.local.LocalLauncher, and print its result row."""

from __future__ import annotations

import argparse

from autotune.cli.common import add_overrides, gib, positive_int, print_json


def add_parser(subparsers, name: str) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        name,
        help="run one layout (plan.*) of the benchmark trainer locally",
        description="Benchmark one layout locally, e.g. `autotune bench --nproc 4 model=tiny "
        "plan.dp=2 plan.tp=2`; dp defaults to --nproc / (tp*pp*cp).",
    )
    p.add_argument(
        "--nproc", type=positive_int("--nproc"), default=None, help="number of ranks; must equal plan.dp*tp*pp*cp"
    )
    p.add_argument(
        "--steps",
        type=positive_int("--steps"),
        default=None,
        help="timed steps (default: sweep.timed_steps); warm-up steps stay sweep.warmup_steps",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="a trial file written by `autotune export` (then overrides are not allowed)",
    )
    p.add_argument(
        "--scale-down",
        action="store_true",
        help="run the --nproc layout as a scale-down trial on --available-gpus ranks and print its composed "
        "full-size row (docs/scale_down.md)",
    )
    p.add_argument("--available-gpus", type=positive_int("--available-gpus"), default=None, help="with --scale-down")
    p.add_argument("--json", action="store_true", help="print the result row as JSON")
    p.add_argument("--workdir", default=None, help="where trial files and logs go (default: results/_local_trials)")
    add_overrides(p)
    p.set_defaults(run=run)
    return p


def build_spec(args):
    from autotune.core.trial import TrialSpec
    from autotune.results.trialfile import load_trialfile, make_spec
    from autotune.spec.config import ConfigError

    extra = {} if args.steps is None else {"timed_steps": args.steps}
    if args.config is not None:
        if args.overrides:
            raise ConfigError(f"--config={args.config!r} runs the file as is; drop the overrides {args.overrides}")
        model, train, cluster, plan = load_trialfile(args.config)
        if args.nproc is not None and plan.world_size != args.nproc:
            raise ConfigError(
                f"--nproc={args.nproc} != plan dp({plan.dp}) * tp({plan.tp}) * pp({plan.pp}) * "
                f"cp({plan.cp}) = {plan.world_size} in {args.config}"
            )
        _refuse_invalid(plan, model, train, cluster, None)
        return TrialSpec(
            sweep_id="bench", trial_id="bench", model=model, train=train, cluster=cluster, plan=plan, **extra
        )
    if args.nproc is None:
        raise ConfigError("--nproc is required unless --config gives the layout (--nproc N must equal dp*tp*pp*cp)")
    from autotune.cli.keys import load_config_for

    cfg = load_config_for("bench", args.overrides)
    plan = cfg.plan(args.nproc)
    if plan.world_size != args.nproc:
        raise ConfigError(
            f"--nproc={args.nproc} != plan dp({plan.dp}) * tp({plan.tp}) * pp({plan.pp}) * "
            f"cp({plan.cp}) = {plan.world_size}"
        )
    _refuse_invalid(plan, cfg.model, cfg.train, cfg.cluster, cfg.space)
    return make_spec(cfg, plan, sweep_id="bench", trial_id="bench", **extra)


def _refuse_invalid(plan, model, train, cluster, space) -> None:
    """The planner's rules (tp | heads, pp <= layers, ...): a layout it would reject is a one-line error, not a trial
    that crashes on N ranks."""
    from autotune.layouts.rules import check_plan
    from autotune.spec.config import ConfigError

    reason = check_plan(plan, model, train, cluster, space)
    if reason is not None:
        raise ConfigError(reason)


def run_local(spec, workdir: str | None) -> dict:
    from launchers.local import LocalLauncher

    launcher = LocalLauncher(workdir=workdir)
    try:
        return launcher.submit(spec).result()
    finally:
        launcher.close()


def run(args) -> int:
    from autotune.core.errors import UsageError

    spec = build_spec(args)
    if args.scale_down != (args.available_gpus is not None):
        raise UsageError("--scale-down and --available-gpus=N go together (N: the ranks the replica runs on)")
    if args.scale_down:
        row = run_scaled(spec, args.available_gpus, args.workdir)
    else:
        row = run_local(spec, args.workdir)
    if args.json:
        print_json(row)
    else:
        _print(row)
    return 0 if row.get("status") == "ok" else 1


def run_scaled(spec, available_gpus: int, workdir: str | None) -> dict:
    """The scale-down trial of `spec` on `available_gpus` local ranks and its composed full-size row."""
    from autotune.run.scaledown import compose_row, replica_spec

    sd = replica_spec(spec, available_gpus)
    r = sd.replica
    _refuse_invalid(r.plan, r.model, r.train, r.cluster, None)
    row = compose_row(sd, run_local(r, workdir))
    if row["status"] == "ok" and spec.plan.pp == 1 and spec.plan.offload == "none":
        # the full-size layout's per-rank peak, measured on one device under a fake process group (probe-memory; it
        # supports pp = 1 only): the replica's own memory is not the target's
        from bench_model.memory_probe import probe_memory

        mem = probe_memory(spec)
        row.update(
            peak_mem_allocated_bytes=int(mem["mem_allocated_bytes"]),
            peak_mem_reserved_bytes=int(mem["mem_reserved_bytes"]),
            measured_parts=row["measured_parts"] + ",memory",
        )
    return row


def _fmt(x, spec: str = ".4g") -> str:
    return "-" if x is None else format(x, spec)


def _print(row: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"bench {row['model_name']}: dp={row['dp']} tp={row['tp']} pp={row['pp']} cp={row['cp']} "
        f"vpp={row['vpp']} ep={row.get('ep')} etp={row.get('etp')} zero={row['zero_stage']} mbs={row['micro_batch_size']} "
        f"ga={row['grad_accum_steps']} recompute={row['recompute']} sp={row['sequence_parallel']}",
        show_header=False,
    )
    losses = row.get("losses") or []
    items = [
        (
            "status",
            row["status"] + (f" ({row['error_type']}: {row['error_message']})" if row.get("error_type") else ""),
        ),
        ("tokens/s", _fmt(row.get("tokens_per_s"), ".1f")),
        ("tokens/s per rank", _fmt(row.get("tokens_per_s_per_gpu"), ".1f")),
        ("MFU", _fmt(row.get("mfu"), ".3%")),
        ("TFLOP/s per rank", _fmt(row.get("tflops_per_gpu"), ".4f")),
        (
            "step time",
            f"{_fmt(row.get('step_time_mean_s'), '.3f')} s ± {_fmt(row.get('step_time_std_s'), '.3f')}"
            f" over {row.get('timed_steps')} steps",
        ),
        (
            "peak memory (worst rank)",
            f"{gib(row.get('peak_mem_allocated_bytes'))} allocated, {gib(row.get('peak_mem_reserved_bytes'))} reserved",
        ),
        ("losses", " ".join(f"{x:.4f}" for x in losses)),
        ("wall", f"{_fmt(row.get('wall_s'), '.1f')} s"),
        *_scale_down_items(row),
    ]
    for k, v in items:
        table.add_row(k, v)
    console = Console()
    console.print(table)
    console.print(f"log: {row.get('log_path')}", highlight=False, soft_wrap=True)  # whole, never cut to the width


def _scale_down_items(row: dict) -> list[tuple[str, str]]:
    if not row.get("scaled_from"):
        return []
    replica = " ".join(f"{a}={row.get('replica_' + a)}" for a in ("dp", "tp", "pp", "cp", "ep", "etp"))
    return [
        (
            "scale-down replica",
            f"{row.get('replica_num_gpus')} ranks: {replica}, {row.get('replica_num_layers')} layers",
        ),
        ("replica step (measured)", f"{_fmt(row.get('replica_step_time_s'), '.4f')} s"),
        ("measured parts", str(row.get("measured_parts"))),
        ("modelled parts", str(row.get("modelled_parts"))),
        ("full-size trial would cost", f"{_fmt(row.get('full_size_gpu_seconds'), '.1f')} GPU-s"),
    ]
