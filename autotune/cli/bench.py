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
    spec = build_spec(args)
    row = run_local(spec, args.workdir)
    if args.json:
        print_json(row)
    else:
        _print(row)
    return 0 if row.get("status") == "ok" else 1


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
    ]
    for k, v in items:
        table.add_row(k, v)
    console = Console()
    console.print(table)
    console.print(f"log: {row.get('log_path')}", highlight=False, soft_wrap=True)  # whole, never cut to the width
