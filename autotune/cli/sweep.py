"""`autotune sweep --gpus N [--backend ...] [--strategy ...] [--max-trials K] [--steps S] [--parallel P]
[--available-gpus A] [--sweep-id NAME] [--resume DIR] [--resume-if-exists] [overrides]`"""

from __future__ import annotations

import argparse
import sys

from autotune.cli.common import add_overrides, positive_float, positive_int
from autotune.core.errors import UsageError

# test-only faults a trial can be given (bench_model/run.py FAULTS; kept here so `autotune --help` imports no torch)
FAULTS = ("crash", "hang", "hang_rank1", "crash_rank1", "kill_rank1")


def _fault(text: str) -> tuple[int, str, float | None]:
    parts = text.split(":")
    try:
        index = int(parts[0])
        timeout = float(parts[2]) if len(parts) > 2 else None
    except (ValueError, IndexError):
        raise argparse.ArgumentTypeError(f"--inject-fault={text!r} must be I:FAULT[:TIMEOUT_S]") from None
    if len(parts) < 2 or index < 1 or parts[1] not in FAULTS:
        raise argparse.ArgumentTypeError(
            f"--inject-fault={text!r} must be I:FAULT[:TIMEOUT_S] with I >= 1 and FAULT one of {', '.join(FAULTS)}"
        )
    return index, parts[1], timeout


def add_parser(sub, name: str) -> None:
    from autotune.search.strategies import STRATEGIES
    from launchers import launcher_names

    p = sub.add_parser(
        name,
        help="plan, run the most promising layouts, record every outcome, rank them",
        description="Plan the layouts of N GPUs, run them (best predicted first) through a launcher, "
        "write one Parquet row per trial under results/<sweep_id>/, print a ranked table.",
    )
    p.add_argument("--gpus", type=positive_int("--gpus"), help="GPUs (ranks) per trial; read back on --resume")
    p.add_argument("--backend", choices=launcher_names(), help="where trials run (default: sweep.backend, local)")
    # not argparse choices: get_strategy checks the name against the same registry, also for sweep.strategy in YAML
    p.add_argument("--strategy", help=f"{' | '.join(STRATEGIES)} (default: sweep.strategy)")
    p.add_argument(
        "--objective",
        choices=("throughput", "pareto"),
        help="optuna: throughput (TPE) or pareto (NSGA-II, throughput vs peak memory)",
    )
    p.add_argument("--storage", help="optuna study storage URL (default sqlite:///results/<sweep>/optuna.db)")
    p.add_argument(
        "--budget-gpu-hours",
        type=positive_float("--budget-gpu-hours"),
        help="start no trial once this many GPU-hours are spent",
    )
    p.add_argument(
        "--available-gpus",
        type=positive_int("--available-gpus"),
        help="run each layout of --gpus as a scale-down trial on this many GPUs and compose its full-size row "
        "(docs/scale_down.md); read back on --resume",
    )
    p.add_argument("--max-trials", type=positive_int("--max-trials"), help="trials to run (default sweep.max_trials)")
    p.add_argument("--steps", type=positive_int("--steps"), help="timed steps per trial (default sweep.timed_steps)")
    p.add_argument("--parallel", type=positive_int("--parallel"), help="trials in flight at once (default 1)")
    p.add_argument("--timeout-s", type=positive_float("--timeout-s"), help="per-trial wall-clock limit")
    p.add_argument("--sweep-id", help="folder name under sweep.results_dir (default: time-model-Ng)")
    p.add_argument("--resume", metavar="DIR", help="continue the sweep in DIR; finished candidates are not rerun")
    p.add_argument("--resume-if-exists", action="store_true", help="with --sweep-id: resume it if it exists")
    # tests and the reliability benchmark only: make the I-th trial of this run fail (docs/trial_protocol.md)
    p.add_argument("--inject-fault", action="append", type=_fault, default=[], help=argparse.SUPPRESS)
    p.add_argument("--memory-limit-bytes", type=positive_int("--memory-limit-bytes"), help=argparse.SUPPRESS)
    add_overrides(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from autotune.analyse.report import print_summary
    from autotune.cli.keys import check_overrides
    from autotune.run.controller import SweepRequest, flag_overrides, make_console, run_sweep

    if args.resume and args.sweep_id:
        raise UsageError("--resume and --sweep-id name the folder twice: give one")
    flags = flag_overrides(
        backend=args.backend,
        strategy=args.strategy,
        max_trials=args.max_trials,
        steps=args.steps,
        parallel=args.parallel,
    )
    if args.timeout_s is not None:
        flags.append(f"sweep.timeout_s={args.timeout_s}")
    for key in ("objective", "storage", "budget_gpu_hours"):
        if getattr(args, key) is not None:
            flags.append(f"sweep.{key}={getattr(args, key)}")
    req = SweepRequest(
        num_gpus=args.gpus,
        overrides=tuple(check_overrides("sweep", args.overrides) + flags),
        sweep_id=args.sweep_id,
        resume=args.resume,
        resume_if_exists=args.resume_if_exists,
        inject_faults=tuple(args.inject_fault),
        argv=tuple(sys.argv[1:]),
        memory_limit_bytes=args.memory_limit_bytes,
        available_gpus=args.available_gpus,
    )
    console = make_console()
    print_summary(run_sweep(req, console), console, top=10)  # the ranked table of every row, this run's and earlier
    return 0
