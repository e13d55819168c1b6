"""SLURM job shapes and sbatch text, with no SLURM call: the `sweep.slurm` options (checked), the size and time limit
of one trial's job, submitit's executor parameters, and the controller script that `autotune submit` hands to sbatch.

Quoting: every value that reaches a script goes through `shlex.quote` (here or in submitit's `_as_sbatch_flag`), and
names that sbatch reads from `#SBATCH` lines are additionally refused if they hold whitespace, quotes or shell
metacharacters, so a hostile `partition="a b; rm -rf /"` is a one-line ValueError, never a command.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.core.errors import SpecError
from autotune.core.trial import TrialSpec
from launchers.protocol import REPO_ROOT, rank_args, rank_comm_env

# sbatch option values we accept from config: partition/account/qos/job names and constraint expressions
# ("a100&ib", "[rack1|rack2]*2"). No whitespace, quotes, backslash, `$`, backtick or `;`.
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.,:@%+=/&|!\[\]*()#^-]+$")
_SBATCH_LINE = re.compile(r"^--(?P<key>[a-z][a-z0-9-]*)(=(?P<value>[^\n\r\x00]*))?$")
# Set by us: an extra line may not silently change the job's shape, its output files or the array.
_RESERVED_KEYS = {
    "nodes",
    "ntasks",
    "ntasks-per-node",
    "array",
    "output",
    "error",
    "wrap",
    "open-mode",
    "signal",
    "gres",
    "job-name",
    "time",
}


def check_value(field: str, value: Any) -> str:
    text = str(value)
    if not _SAFE_VALUE.match(text):
        raise SpecError(
            f"{field}={text!r} must be a plain SLURM name or expression "
            "(no spaces, quotes, backslash, $, backtick or ;)"
        )
    return text


def check_one_line(field: str, text: str) -> str:
    """A value bound for a `#SBATCH` line (paths too): bash ends that comment at a newline, so no quoting protects the
    rest of the value, which would run as a command."""
    if any(c in text for c in "\n\r\x00"):
        raise SpecError(f"{field}={text!r} must not contain a newline (it would end its #SBATCH line)")
    return text


@dataclass(frozen=True)
class SlurmOptions:
    """`sweep.slurm.*` (search_spaces/sweep/default.yaml); see docs/engines.md."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    extra_sbatch: tuple[str, ...] = ()  # e.g. ("--reservation=big", "--exclusive")
    gpus_per_node: int | None = None  # None = cluster.gpus_per_node
    cpus_per_task: int | None = None
    use_gres: bool = True  # request --gres=gpu:<ranks per node>
    time_limit_floor_min: int = 10
    time_limit_factor: float = 3.0  # x predicted run time (warmup + timed steps)
    startup_s: float = 180.0  # imports, rendezvous, model build: added to the predicted run time
    max_in_flight: int = 16  # job-array parallelism: `--array=0-N%max_in_flight`
    max_requeues: int = 2  # NODE_FAIL / PREEMPTED / BOOT_FAIL resubmissions per trial
    poll_s: float = 5.0  # squeue/sacct period (one call for all jobs of the launcher)
    batch_window_s: float = 0.5  # trials submitted this close together leave as one job array
    controller_partition: str | None = None  # `autotune submit`: where the controller job runs (None = partition)
    controller_time_min: int = 24 * 60
    controller_cpus: int = 2

    def __post_init__(self) -> None:
        for name in ("partition", "account", "qos", "constraint", "controller_partition"):
            if getattr(self, name) is not None:
                check_value(f"sweep.slurm.{name}", getattr(self, name))
        for name in ("gpus_per_node", "cpus_per_task"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise SpecError(f"sweep.slurm.{name}={v!r} must be null or an integer >= 1")
        for name in ("time_limit_floor_min", "max_in_flight", "controller_time_min", "controller_cpus"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SpecError(f"sweep.slurm.{name}={v!r} must be an integer >= 1")
        if isinstance(self.max_requeues, bool) or not isinstance(self.max_requeues, int) or self.max_requeues < 0:
            raise SpecError(f"sweep.slurm.max_requeues={self.max_requeues!r} must be an integer >= 0")
        for name in ("time_limit_factor", "startup_s", "poll_s", "batch_window_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise SpecError(f"sweep.slurm.{name}={v!r} must be a number > 0")
        extra_sbatch_parameters(self.extra_sbatch)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> SlurmOptions:
        values = dict(values or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise SpecError(f"sweep.slurm.{unknown[0]}: unknown key (known: {', '.join(sorted(known))})")
        extra = values.get("extra_sbatch")
        if extra is not None:
            if isinstance(extra, str) or not isinstance(extra, Iterable):
                raise SpecError(f"sweep.slurm.extra_sbatch={extra!r} must be a list of '--key[=value]' strings")
            values["extra_sbatch"] = tuple(extra)
        return cls(**values)


def extra_sbatch_parameters(lines: Iterable[str]) -> dict[str, Any]:
    """`["--reservation=big", "--exclusive"]` -> {"reservation": "big", "exclusive": True} for submitit, which
    shlex-quotes each value into its `#SBATCH --key=value` line."""
    out: dict[str, Any] = {}
    for line in lines:
        m = _SBATCH_LINE.match(line) if isinstance(line, str) else None
        if m is None:
            raise SpecError(
                f"sweep.slurm.extra_sbatch entry {line!r} must look like '--key=value' or '--flag' "
                "(one line, lower-case key)"
            )
        key = m.group("key")
        if key in _RESERVED_KEYS:
            raise SpecError(f"sweep.slurm.extra_sbatch entry {line!r}: --{key} is set by the launcher")
        value = m.group("value")
        out[key] = True if value is None else check_value(f"sweep.slurm.extra_sbatch --{key}", value)
    return out


@dataclass(frozen=True)
class JobShape:
    """One trial as one SLURM job: one task per rank (per GPU), `tasks_per_node` tasks on each of `nodes` nodes."""

    nodes: int
    tasks_per_node: int
    gpus_per_node: int  # gres request (0 = none)
    time_min: int


def predicted_run_s(spec: TrialSpec) -> float | None:
    """Warmup + timed steps at the predicted speed: step_s = global_batch_tokens / (tokens/s/GPU x GPUs), + the
    compile time of a compiled trial (autotune/predict/perf_terms.py compile_time_s)."""
    per_gpu = spec.pred_tokens_per_s_per_gpu
    if not per_gpu or per_gpu <= 0:
        return None
    step_s = spec.train.global_batch_tokens / (per_gpu * spec.plan.world_size)
    return (spec.warmup_steps + spec.timed_steps) * step_s + _compile_s(spec)


def _compile_s(spec: TrialSpec) -> float:
    from autotune.predict.perf_terms import compile_time_s

    return float(compile_time_s([spec.plan.compile], spec.cluster)[0])


def time_limit_min(spec: TrialSpec, opts: SlurmOptions) -> int:
    """SLURM's own kill switch, a backstop behind the launcher's `timeout_s`: startup + factor x predicted run time
    (or timeout_s when nothing is predicted), never above timeout_s + startup, never below the floor."""
    cap_s = float(spec.timeout_s) + opts.startup_s
    run_s = predicted_run_s(spec)
    want_s = cap_s if run_s is None else min(cap_s, opts.startup_s + opts.time_limit_factor * run_s)
    return max(opts.time_limit_floor_min, math.ceil(want_s / 60.0))


def job_shape(spec: TrialSpec, opts: SlurmOptions) -> JobShape:
    world = spec.plan.world_size
    per_node = opts.gpus_per_node or spec.cluster.gpus_per_node
    nodes = math.ceil(world / per_node)
    if world % nodes:
        raise SpecError(f"plan world size {world} cannot be spread evenly over {nodes} nodes of {per_node} GPUs")
    tasks = world // nodes
    return JobShape(
        nodes=nodes,
        tasks_per_node=tasks,
        gpus_per_node=tasks if opts.use_gres else 0,
        time_min=time_limit_min(spec, opts),
    )


def executor_parameters(shape: JobShape, opts: SlurmOptions, job_name: str, setup: list[str]) -> dict[str, Any]:
    """Keyword arguments for `submitit.SlurmExecutor.update_parameters`."""
    params: dict[str, Any] = dict(
        job_name=check_value("job name", job_name),
        nodes=shape.nodes,
        ntasks_per_node=shape.tasks_per_node,
        time=shape.time_min,
        stderr_to_stdout=True,
        array_parallelism=opts.max_in_flight,
        setup=setup,
        # one failing rank ends the step (its peers would otherwise wait in a collective until the time limit)
        srun_args=["--kill-on-bad-exit=1"],
        # requeueing is ours (bounded, and a fresh result folder); SLURM's own would rerun silently
        additional_parameters={"no-requeue": True, **extra_sbatch_parameters(opts.extra_sbatch)},
        # submitit sends USR2 this long before the time limit; we do not checkpoint, so keep it short
        signal_delay_s=30,
    )
    if shape.gpus_per_node:
        params["gres"] = f"gpu:{shape.gpus_per_node}"
    if opts.cpus_per_task:
        params["cpus_per_task"] = opts.cpus_per_task
    for name in ("partition", "account", "qos", "constraint"):
        if getattr(opts, name):
            params[name] = getattr(opts, name)
    return params


def controller_script(
    sweep_argv: list[str], *, python: str, workdir: str, log_path: str, job_name: str, opts: SlurmOptions
) -> str:
    """The sbatch script that runs `autotune sweep <sweep_argv>` as a batch job (survives logout). Every argument is
    shlex-quoted onto the exec line; `#SBATCH` values are checked names, quoted too."""
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={q(check_value('job name', job_name))}",
        f"#SBATCH --output={q(check_one_line('log path', log_path))}",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        f"#SBATCH --cpus-per-task={int(opts.controller_cpus)}",
        f"#SBATCH --time={int(opts.controller_time_min)}",
    ]
    partition = opts.controller_partition or opts.partition
    for key, value in (("partition", partition), ("account", opts.account), ("qos", opts.qos)):
        if value:
            lines.append(f"#SBATCH --{key}={q(check_value(f'sweep.slurm.{key}', value))}")
    lines += [
        "",
        "# the sweep controller: plans, submits trial jobs (job arrays) and writes one Parquet row per trial",
        "set -euo pipefail",
        f"cd {q(workdir)}",
        " ".join(["exec", q(python), "-m", "autotune.cli.main", "sweep", *(q(a) for a in sweep_argv)]),
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- inside the job (one call per SLURM task)
# Kept in this light module: each of the job's tasks imports it (submitit unpickles `run_rank` by reference), and
# pulling pyarrow in (autotune.results.schema) would cost every rank a second of CPU on a busy node; launchers.protocol is light.


def expand_hostnames(nodelist: str) -> list[str]:
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=60)
    names = out.stdout.split()
    return names or [nodelist]


def rank_env(environ: dict[str, str], tp: int = 1, hostnames: list[str] | None = None) -> dict[str, str]:
    """torch.distributed's env:// variables from SLURM's task environment, plus the communication defaults of
    `launchers.protocol.rank_comm_env`. MASTER_ADDR is the IPv4 of the job's first node (`scontrol show hostnames`,
    resolved on this node: another host's address on a multi-node job). The master port is derived from the job id
    (distinct for every job and array element), so concurrent trials on one node do not collide."""
    hosts = hostnames or expand_hostnames(environ["SLURM_JOB_NODELIST"])
    master = socket.gethostbyname(hosts[0])  # IPv4 of the first node ("localhost" -> 127.0.0.1 in tests)
    per_node = re.match(r"\d+", environ.get("SLURM_STEP_TASKS_PER_NODE") or environ.get("SLURM_NTASKS_PER_NODE", "1"))
    env = {
        "RANK": environ["SLURM_PROCID"],
        "WORLD_SIZE": environ["SLURM_NTASKS"],
        "LOCAL_RANK": environ["SLURM_LOCALID"],
        "LOCAL_WORLD_SIZE": per_node.group(0) if per_node else "1",
        "GROUP_RANK": environ.get("SLURM_NODEID", "0"),
        "MASTER_ADDR": master,
        "MASTER_PORT": str(20000 + int(environ["SLURM_JOB_ID"]) % 20000),
    }
    return {**env, **rank_comm_env(environ, master, tp, num_hosts=len(hosts))}


def _spec_tp(spec_path: str) -> int:
    import json

    try:
        return int(json.loads(Path(spec_path).read_text())["plan"]["tp"])
    except (OSError, ValueError, KeyError, TypeError):  # not a trial spec (protocol tests): the rank reports it
        return 1


def run_rank(spec_path: str, result_path: str, module: str = "bench_model.run") -> None:
    """Entry point of every SLURM task (submitted through submitit). A failing rank exits non-zero so that
    `srun --kill-on-bad-exit` ends its peers instead of leaving them blocked in a collective."""
    env = dict(os.environ)
    env.update(rank_env(env, tp=_spec_tp(spec_path)))
    env.setdefault("OMP_NUM_THREADS", "1")
    # one line per task log: where this rank ran and whom it met (the multi-node engine test reads it)
    print(
        f"autotune rank {env['RANK']}/{env['WORLD_SIZE']} on {socket.gethostname()}: "
        f"rendezvous {env['MASTER_ADDR']}:{env['MASTER_PORT']}",
        flush=True,
    )
    proc = subprocess.run(
        [sys.executable, *rank_args(module, spec_path, result_path)],
        env=env,
        cwd=str(REPO_ROOT),
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        sys.stdout.flush()
        os._exit(proc.returncode if 0 < proc.returncode < 256 else 1)
