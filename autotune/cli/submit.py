"""`autotune submit [sweep args] [--dry-run]`: run the sweep controller itself as a SLURM batch job, so the sweep
survives logout. Takes exactly `autotune sweep`'s arguments (same parser), prints the job id and the results path. Without
`--backend` (and with `sweep.backend: local`) the trials go to SLURM too: `--backend slurm` is added.

The controller script lands in `<results_dir>/<sweep_id>.submit/` (the sweep folder itself must stay empty until the
controller creates it); `--dry-run` writes that script plus the job-array scripts of the first wave of trials into
`<results_dir>/<sweep_id>/sbatch/` and submits nothing. Every argument is shlex-quoted into the script
(launchers/sbatch.py `controller_script`).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from autotune.cli import sweep as sweep_cli
from autotune.core.errors import AutotuneError, UsageError

_OWN = {"dry_run", "help", "run"}


def add_parser(sub, name: str) -> None:
    sweep_cli.add_parser(sub, name)  # the very same flags as `autotune sweep`, validated the same way
    p = sub.choices[name]
    p.description = (
        "Submit `autotune sweep` as a SLURM batch job (survives logout); prints the job id and results "
        "path. --dry-run writes the sbatch scripts into the sweep folder without submitting."
    )
    p.add_argument("--dry-run", action="store_true", help="write the sbatch scripts, submit nothing")
    p.set_defaults(run=run, _parser=p)
    for action in sub._choices_actions:  # the listing line of `autotune --help`
        if action.dest == name:
            action.help = "run the sweep controller as a SLURM job (survives logout); --dry-run shows the scripts"


def sweep_argv(args: argparse.Namespace) -> list[str]:
    """The parsed sweep flags as an argv again (only the ones that differ from their defaults)."""
    argv: list[str] = []
    for action in args._parser._actions:
        if action.dest in _OWN or action.dest.startswith("_") or not action.option_strings:
            continue
        value = getattr(args, action.dest, None)
        if value == action.default:
            continue
        if isinstance(action, argparse._AppendAction):
            raise UsageError(f"{action.option_strings[0]} is a test-only flag and cannot be submitted")
        if isinstance(action, argparse._StoreTrueAction):
            argv.append(action.option_strings[0])
        else:
            argv += [action.option_strings[-1], str(value)]
    return argv + list(args.overrides)


def _sweep_id(args: argparse.Namespace, cfg: Any) -> str:
    if args.sweep_id:
        if "/" in args.sweep_id or args.sweep_id in ("", ".", ".."):
            raise UsageError(f"--sweep-id={args.sweep_id!r} must be a plain folder name (no '/')")
        return args.sweep_id
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{cfg.model.name}-{args.gpus}g"


def run(args: argparse.Namespace) -> int:
    from autotune.spec.config import load_config
    from launchers.sbatch import SlurmOptions, controller_script

    if args.resume:
        raise UsageError("--resume: submit a new sweep, or run `autotune sweep --resume DIR` inside a job yourself")
    if args.gpus is None:
        raise UsageError("--gpus is required")
    from autotune.cli.keys import check_overrides

    args.overrides = check_overrides("submit", args.overrides)
    cfg = load_config(list(args.overrides))
    opts = SlurmOptions.from_mapping(cfg.sweep.slurm)
    sweep_id = _sweep_id(args, cfg)
    argv = sweep_argv(args)
    if not args.sweep_id:
        argv = ["--sweep-id", sweep_id, *argv]
    if args.backend is None and cfg.sweep.backend == "local":  # a controller job's own node is not where trials go
        argv = ["--backend", "slurm", *argv]
        args.backend = "slurm"
    results = Path(cfg.sweep.results_dir).resolve()
    sweep_dir = results / sweep_id
    script_dir = sweep_dir / "sbatch" if args.dry_run else results / f"{sweep_id}.submit"
    if not args.dry_run and sweep_dir.exists():
        raise UsageError(
            f"--sweep-id={sweep_id!r}: {sweep_dir} already exists (a dry run or an earlier sweep); "
            "choose another --sweep-id"
        )
    text = controller_script(
        argv,
        python=sys.executable,
        workdir=str(Path.cwd()),
        log_path=str(script_dir / "controller-%j.log"),
        job_name=f"autotune-{sweep_id}",
        opts=opts,
    )
    scripts = {"controller.sbatch": text}  # every script is built (and refused) before anything is written
    if args.dry_run:
        scripts.update(_trial_scripts(cfg, args, sweep_id, opts))
    script_dir.mkdir(parents=True, exist_ok=True)
    for name, body in scripts.items():
        (script_dir / name).write_text(body)
    controller = script_dir / "controller.sbatch"
    if args.dry_run:
        print(f"dry run: nothing submitted; scripts in {script_dir}")
        for name in scripts:
            print(f"  {script_dir / name}")
        return 0
    out = subprocess.run(["sbatch", "--parsable", str(controller)], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise AutotuneError(f"sbatch refused {controller}: {' '.join(out.stderr.split())}")
    job_id = out.stdout.strip().split(";")[0]
    print(f"submitted controller job {job_id}")
    print(f"results: {sweep_dir}")
    print(f"log:     {script_dir / f'controller-{job_id}.log'}")
    print(f"follow:  squeue -j {job_id}   |   autotune report {shlex.quote(str(sweep_dir))}")
    return 0


def _trial_scripts(cfg: Any, args: argparse.Namespace, sweep_id: str, opts: Any) -> dict[str, str]:
    """The job-array scripts the controller would submit for its first wave (the best-predicted candidates, as many
    as run at once), one per job shape, exactly as launchers/slurm.py builds them: file name -> text."""
    from autotune.layouts.candidate import Candidate
    from autotune.layouts.planner import enumerate_candidates
    from autotune.run.rows import candidate_spec
    from launchers.slurm import trial_script_text

    frame = enumerate_candidates(cfg, args.gpus)
    runnable = frame[frame["rank"].notna()].sort_values("rank", kind="stable")
    wave = max(1, min(args.parallel or cfg.sweep.parallel, cfg.sweep.max_trials, opts.max_in_flight))
    specs = [
        candidate_spec(cfg, Candidate.from_row(row), sweep_id=sweep_id, backend="slurm", timeout_s=cfg.sweep.timeout_s)
        for _, row in runnable.head(wave).iterrows()
    ]
    logs = Path(cfg.sweep.results_dir).resolve() / sweep_id / "logs"  # the sweep's launcher log_dir
    scripts = {}
    for i, (text, members) in enumerate(trial_script_text(specs, opts, logs)):
        shebang, _, rest = text.partition("\n")
        scripts[f"trials-wave0-{i}.sbatch"] = (
            f"{shebang}\n# first wave, {len(members)} trial(s): {', '.join(members)}\n{rest}"
        )
    return scripts
